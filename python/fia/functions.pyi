"""Type stubs of fia.functions: torch_npu's attention functions (FIA-SPEC 2.1)."""
from typing import List, Optional, Sequence, Tuple, Union

import numpy
import torch

Array = Union[torch.Tensor, numpy.ndarray]
IntList = Optional[Union[Sequence[int], torch.Tensor, numpy.ndarray]]
INT_MAX: int

def npu_fused_infer_attention_score(
    query: Array, key: Union[Array, List[Array]], value: Union[Array, List[Array]], *,
    pse_shift: Optional[Array] = None, atten_mask: Optional[Array] = None,
    actual_seq_lengths: IntList = None, actual_seq_lengths_kv: IntList = None,
    dequant_scale1: Optional[Array] = None, quant_scale1: Optional[Array] = None,
    dequant_scale2: Optional[Array] = None, quant_scale2: Optional[Array] = None,
    quant_offset2: Optional[Array] = None, antiquant_scale: Optional[Array] = None,
    antiquant_offset: Optional[Array] = None, key_antiquant_scale: Optional[Array] = None,
    key_antiquant_offset: Optional[Array] = None, value_antiquant_scale: Optional[Array] = None,
    value_antiquant_offset: Optional[Array] = None, block_table: Optional[Array] = None,
    query_padding_size: Optional[Array] = None, kv_padding_size: Optional[Array] = None,
    key_shared_prefix: Optional[Array] = None, value_shared_prefix: Optional[Array] = None,
    actual_shared_prefix_len: IntList = None, query_rope: Optional[Array] = None,
    key_rope: Optional[Array] = None, key_rope_antiquant_scale: Optional[Array] = None,
    dequant_scale_query: Optional[Array] = None, learnable_sink: Optional[Array] = None, num_heads: int = 1,
    scale: float = 1.0, pre_tokens: int = 2147483647, next_tokens: int = 2147483647,
    input_layout: str = "BSH", num_key_value_heads: int = 0, sparse_mode: int = 0, inner_precise: int = 0,
    block_size: int = 0, antiquant_mode: int = 0, key_antiquant_mode: int = 0, value_antiquant_mode: int = 0,
    softmax_lse_flag: bool = False, query_quant_mode: int = 0, scale_value: Optional[float] = None,
    backend: str = "default", strict: bool = False, threads: int = 0, post_quant_rounding: str = "device",
) -> Tuple[Array, Array]: ...

def npu_fused_infer_attention_score_v2(
    query: Array, key: Union[Array, List[Array]], value: Union[Array, List[Array]], *,
    query_rope: Optional[Array] = None, key_rope: Optional[Array] = None, pse_shift: Optional[Array] = None,
    atten_mask: Optional[Array] = None, actual_seq_qlen: IntList = None, actual_seq_kvlen: IntList = None,
    block_table: Optional[Array] = None, dequant_scale_query: Optional[Array] = None,
    dequant_scale_key: Optional[Array] = None, dequant_offset_key: Optional[Array] = None,
    dequant_scale_value: Optional[Array] = None, dequant_offset_value: Optional[Array] = None,
    dequant_scale_key_rope: Optional[Array] = None, quant_scale_out: Optional[Array] = None,
    quant_offset_out: Optional[Array] = None, quant_scale_p: Optional[Array] = None,
    learnable_sink: Optional[Array] = None, num_query_heads: int = 1, num_key_value_heads: int = 0,
    softmax_scale: float = 1.0, pre_tokens: int = 2147483647, next_tokens: int = 2147483647,
    input_layout: str = "BSH", sparse_mode: int = 0, block_size: int = 0, query_quant_mode: int = 0,
    key_quant_mode: int = 0, value_quant_mode: int = 0, inner_precise: int = 0,
    return_softmax_lse: bool = False, query_dtype: Optional[int] = None, key_dtype: Optional[int] = None,
    value_dtype: Optional[int] = None, query_rope_dtype: Optional[int] = None,
    key_rope_dtype: Optional[int] = None, key_shared_prefix_dtype: Optional[int] = None,
    value_shared_prefix_dtype: Optional[int] = None, dequant_scale_query_dtype: Optional[int] = None,
    dequant_scale_key_dtype: Optional[int] = None, dequant_scale_value_dtype: Optional[int] = None,
    dequant_scale_key_rope_dtype: Optional[int] = None, out_dtype: Optional[int] = None,
    backend: str = "default", strict: bool = False, threads: int = 0, post_quant_rounding: str = "device",
) -> Tuple[Array, Array]: ...

def npu_incre_flash_attention(
    query: Array, key: Union[Array, List[Array]], value: Union[Array, List[Array]], *,
    padding_mask: Optional[Array] = None, atten_mask: Optional[Array] = None,
    pse_shift: Optional[Array] = None, actual_seq_lengths: IntList = None,
    antiquant_scale: Optional[Array] = None, antiquant_offset: Optional[Array] = None,
    block_table: Optional[Array] = None, dequant_scale1: Optional[Array] = None,
    quant_scale1: Optional[Array] = None, dequant_scale2: Optional[Array] = None,
    quant_scale2: Optional[Array] = None, quant_offset2: Optional[Array] = None,
    kv_padding_size: Optional[Array] = None, num_heads: int = 1, scale_value: float = 1.0,
    input_layout: str = "BSH", num_key_value_heads: int = 0, block_size: int = 0, inner_precise: int = 1,
    backend: str = "default", strict: bool = False, threads: int = 0, post_quant_rounding: str = "device",
) -> Array: ...

def npu_prompt_flash_attention(
    query: Array, key: Array, value: Array, *, padding_mask: Optional[Array] = None,
    atten_mask: Optional[Array] = None, pse_shift: Optional[Array] = None,
    actual_seq_lengths: IntList = None, deq_scale1: Optional[Array] = None,
    quant_scale1: Optional[Array] = None, deq_scale2: Optional[Array] = None,
    quant_scale2: Optional[Array] = None, quant_offset2: Optional[Array] = None, num_heads: int = 1,
    scale_value: float = 1.0, pre_tokens: int = 2147483647, next_tokens: int = 0, input_layout: str = "BSH",
    num_key_value_heads: int = 0, actual_seq_lengths_kv: IntList = None, sparse_mode: int = 0,
    backend: str = "default", strict: bool = False, threads: int = 0, post_quant_rounding: str = "device",
) -> Array: ...
