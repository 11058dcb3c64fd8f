"""torch_npu's attention functions on CPU tensors (FIA-SPEC 2.1; the torch_npu docs T1, T2, T5).

Names, positional order, keywords and defaults are torch_npu's (op-plugin's
``op_plugin_functions.yaml``): only ``query``, ``key`` and ``value`` are positional. Three
keyword-only extras choose how fia runs: ``backend`` ("cpu", the fast kernels; "reference", the
float64 transcription of the spec; "default", the ``FIA_BACKEND`` environment variable or cpu),
``strict`` (also enforce the Ascend hardware limits, FIA-SPEC 25.2), ``threads`` (0 = all the
CPUs the process may use; results do not depend on it) and ``post_quant_rounding`` ("device", the
NPU kernel's int8 output formula, or "golden", the vendor test golden's; FIA-SPEC 14.1).

Inputs are torch CPU tensors (outputs are torch tensors; the call is the custom op
``torch.ops.fia.<name>``, so it works under ``torch.compile(fullgraph=True)`` and ``torch.export``)
or numpy arrays (outputs are numpy arrays; bfloat16 through ``ml_dtypes``). Inputs are read in
place, never copied; any strides are accepted as long as the innermost axis is contiguous.

Errors: :class:`fia.InvalidArgumentError` (ValueError), :class:`fia.DtypeError` (TypeError),
:class:`fia.UnsupportedFeatureError` (NotImplementedError), each naming the torch_npu parameter.
"""
from typing import Any, List, Optional, Sequence, Tuple, Union

from . import _calls
from .errors import InvalidArgumentError

try:
    import torch

    from . import _torch_ops  # noqa: F401  (registers torch.ops.fia.*)
except ImportError:  # numpy-only installations
    torch = None

INT_MAX = 2147483647
Array = Any  # a torch.Tensor or numpy.ndarray
IntList = Optional[Sequence[int]]


def _traced(query: Any) -> bool:
    """True when torch may be recording the call (torch.compile, torch.export, make_fx, a
    TorchFunctionMode or TorchDispatchMode, tensor subclasses such as FakeTensor): then the call
    must go through the dispatcher as torch.ops.fia.<name>. Plain eager calls skip it, which saves
    the dispatcher's tens of microseconds per call (bench/python_overhead.py)."""
    return (type(query) is not _Tensor or _is_compiling() or _dispatch_modes() > 0
            or _function_mode_enabled())


if torch is not None:  # bound once: the attribute lookups cost microseconds after a long call
    _Tensor = torch.Tensor
    _is_compiling = torch.compiler.is_compiling
    _dispatch_modes = torch._C._len_torch_dispatch_stack
    _function_mode_enabled = torch._C._is_torch_function_mode_enabled


def _dispatch(function: str, query: Array, key: Any, value: Any, kwargs: dict, backend: str, strict: bool,
              threads: int, post_quant_rounding: str) -> Any:
    """Traced torch calls: the custom op torch.ops.fia.<function>; eager torch calls and numpy
    arrays: the core directly (the op's own kernel does the same). Returns what torch_npu returns:
    (attention_out, softmax_lse) for FIA, attention_out for IFA/PFA."""
    if torch is not None and isinstance(query, torch.Tensor) and _traced(query):
        keys = list(key) if isinstance(key, (list, tuple)) else [key]
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        op = getattr(torch.ops.fia, function)
        return op(query, keys, values, **_calls.normalize(kwargs),
                  **_calls.normalize_extras(backend, strict, threads, post_quant_rounding))
    out, lse = _calls.execute(function, query, key, value, kwargs, backend, strict, threads, post_quant_rounding)
    return (out, lse) if function.startswith("npu_fused") else out


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
        dequant_scale_query: Optional[Array] = None, learnable_sink: Optional[Array] = None,
        num_heads: int = 1, scale: float = 1.0, pre_tokens: int = INT_MAX, next_tokens: int = INT_MAX,
        input_layout: str = "BSH", num_key_value_heads: int = 0, sparse_mode: int = 0, inner_precise: int = 0,
        block_size: int = 0, antiquant_mode: int = 0, key_antiquant_mode: int = 0, value_antiquant_mode: int = 0,
        softmax_lse_flag: bool = False, query_quant_mode: int = 0, scale_value: Optional[float] = None,
        backend: str = "default", strict: bool = False, threads: int = 0,
        post_quant_rounding: str = "device") -> Tuple[Array, Array]:
    """``torch_npu.npu_fused_infer_attention_score`` (aclnnFusedInferAttentionScore V1-V3).

    Attention of ``query`` over ``key``/``value`` in ``input_layout`` (FIA-SPEC 3.1: BSH, BSND,
    BNSD, TND, NTD and the ``_``-joined input_output forms), with GQA (``num_key_value_heads``,
    4), masks and sparse modes 0-4 (6), actual lengths (7), pse (8), paged KV (``block_table``,
    ``block_size``, 9), tensor lists (``key``/``value`` as lists, 10), shared prefix (11), KV
    antiquantization (int8, or int4 packed in int32; 12), MLA rope (15) and softmax_lse (17).
    ``scale_value`` is the torch_npu 6.0 spelling of ``scale`` (give one of them, not both). Beyond torch_npu's
    v1 keywords, the V4 inputs ``dequant_scale_query``, ``learnable_sink`` (16) and
    ``query_quant_mode`` are accepted too, so that every FIA input has a v1 spelling (as in the
    case format, CASE-FORMAT.md).

    Returns ``(attention_out, softmax_lse)``: attention_out in the output layout with head dim
    V_D and the query's dtype (FIA-SPEC 3.1); softmax_lse float32 (B, N, Q_S, 1), or (T, N, 1)
    for TND/NTD, natural-log, +inf for rows with no visible key (17) - a [1] zero tensor unless
    ``softmax_lse_flag``.
    """
    if scale_value is not None:
        if scale != 1.0:
            raise InvalidArgumentError("invalid argument", "scale_value",
                                       f"give scale or its old spelling scale_value, not both: got {scale} and {scale_value}")
        scale = scale_value
    kwargs = dict(
        pse_shift=pse_shift, atten_mask=atten_mask, actual_seq_lengths=actual_seq_lengths,
        actual_seq_lengths_kv=actual_seq_lengths_kv, dequant_scale1=dequant_scale1, quant_scale1=quant_scale1,
        dequant_scale2=dequant_scale2, quant_scale2=quant_scale2, quant_offset2=quant_offset2,
        antiquant_scale=antiquant_scale, antiquant_offset=antiquant_offset,
        key_antiquant_scale=key_antiquant_scale, key_antiquant_offset=key_antiquant_offset,
        value_antiquant_scale=value_antiquant_scale, value_antiquant_offset=value_antiquant_offset,
        block_table=block_table, query_padding_size=query_padding_size, kv_padding_size=kv_padding_size,
        key_shared_prefix=key_shared_prefix, value_shared_prefix=value_shared_prefix,
        actual_shared_prefix_len=actual_shared_prefix_len, query_rope=query_rope, key_rope=key_rope,
        key_rope_antiquant_scale=key_rope_antiquant_scale, dequant_scale_query=dequant_scale_query,
        learnable_sink=learnable_sink, num_heads=num_heads, scale=scale,
        pre_tokens=pre_tokens, next_tokens=next_tokens, input_layout=input_layout,
        num_key_value_heads=num_key_value_heads, sparse_mode=sparse_mode, inner_precise=inner_precise,
        block_size=block_size, antiquant_mode=antiquant_mode, key_antiquant_mode=key_antiquant_mode,
        value_antiquant_mode=value_antiquant_mode, softmax_lse_flag=softmax_lse_flag,
        query_quant_mode=query_quant_mode)
    return _dispatch("npu_fused_infer_attention_score", query, key, value, kwargs, backend, strict, threads, post_quant_rounding)


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
        softmax_scale: float = 1.0, pre_tokens: int = INT_MAX, next_tokens: int = INT_MAX,
        input_layout: str = "BSH", sparse_mode: int = 0, block_size: int = 0, query_quant_mode: int = 0,
        key_quant_mode: int = 0, value_quant_mode: int = 0, inner_precise: int = 0,
        return_softmax_lse: bool = False, query_dtype: Optional[int] = None, key_dtype: Optional[int] = None,
        value_dtype: Optional[int] = None, query_rope_dtype: Optional[int] = None,
        key_rope_dtype: Optional[int] = None, key_shared_prefix_dtype: Optional[int] = None,
        value_shared_prefix_dtype: Optional[int] = None, dequant_scale_query_dtype: Optional[int] = None,
        dequant_scale_key_dtype: Optional[int] = None, dequant_scale_value_dtype: Optional[int] = None,
        dequant_scale_key_rope_dtype: Optional[int] = None, out_dtype: Optional[int] = None,
        backend: str = "default", strict: bool = False, threads: int = 0,
        post_quant_rounding: str = "device") -> Tuple[Array, Array]:
    """``torch_npu.npu_fused_infer_attention_score_v2`` (aclnnFusedInferAttentionScore V4).

    The v1 call with torch_npu v2's names (FIA-SPEC 2.1, python v2 column): ``actual_seq_qlen`` /
    ``actual_seq_kvlen``, ``dequant_scale_key`` etc. for the split antiquant parameters,
    ``quant_scale_out`` / ``quant_offset_out`` for post-quant, ``softmax_scale``,
    ``num_query_heads``, ``return_softmax_lse``; adds ``learnable_sink`` (16) and MLA full quant
    (``dequant_scale_query``, ``query_quant_mode``, 13.3). ``quant_scale_p`` is reserved and
    ignored, as on Atlas A2/A3; the ``*_dtype`` overrides (FP8 inputs) raise
    UnsupportedFeatureError unless None. Returns ``(attention_out, softmax_lse)`` as v1 does.
    """
    kwargs = dict(
        query_rope=query_rope, key_rope=key_rope, pse_shift=pse_shift, atten_mask=atten_mask,
        actual_seq_qlen=actual_seq_qlen, actual_seq_kvlen=actual_seq_kvlen, block_table=block_table,
        dequant_scale_query=dequant_scale_query, dequant_scale_key=dequant_scale_key,
        dequant_offset_key=dequant_offset_key, dequant_scale_value=dequant_scale_value,
        dequant_offset_value=dequant_offset_value, dequant_scale_key_rope=dequant_scale_key_rope,
        quant_scale_out=quant_scale_out, quant_offset_out=quant_offset_out, quant_scale_p=quant_scale_p,
        learnable_sink=learnable_sink, num_query_heads=num_query_heads, num_key_value_heads=num_key_value_heads,
        softmax_scale=softmax_scale, pre_tokens=pre_tokens, next_tokens=next_tokens, input_layout=input_layout,
        sparse_mode=sparse_mode, block_size=block_size, query_quant_mode=query_quant_mode,
        key_quant_mode=key_quant_mode, value_quant_mode=value_quant_mode, inner_precise=inner_precise,
        return_softmax_lse=return_softmax_lse, query_dtype=query_dtype, key_dtype=key_dtype,
        value_dtype=value_dtype, query_rope_dtype=query_rope_dtype, key_rope_dtype=key_rope_dtype,
        key_shared_prefix_dtype=key_shared_prefix_dtype, value_shared_prefix_dtype=value_shared_prefix_dtype,
        dequant_scale_query_dtype=dequant_scale_query_dtype, dequant_scale_key_dtype=dequant_scale_key_dtype,
        dequant_scale_value_dtype=dequant_scale_value_dtype,
        dequant_scale_key_rope_dtype=dequant_scale_key_rope_dtype, out_dtype=out_dtype)
    return _dispatch("npu_fused_infer_attention_score_v2", query, key, value, kwargs, backend, strict, threads, post_quant_rounding)


def npu_incre_flash_attention(
        query: Array, key: Union[Array, List[Array]], value: Union[Array, List[Array]], *,
        padding_mask: Optional[Array] = None, atten_mask: Optional[Array] = None, pse_shift: Optional[Array] = None,
        actual_seq_lengths: IntList = None, antiquant_scale: Optional[Array] = None,
        antiquant_offset: Optional[Array] = None, block_table: Optional[Array] = None,
        dequant_scale1: Optional[Array] = None, quant_scale1: Optional[Array] = None,
        dequant_scale2: Optional[Array] = None, quant_scale2: Optional[Array] = None,
        quant_offset2: Optional[Array] = None, kv_padding_size: Optional[Array] = None, num_heads: int = 1,
        scale_value: float = 1.0, input_layout: str = "BSH", num_key_value_heads: int = 0, block_size: int = 0,
        inner_precise: int = 1, backend: str = "default", strict: bool = False, threads: int = 0,
        post_quant_rounding: str = "device") -> Array:
    """``torch_npu.npu_incre_flash_attention`` (aclnnIncreFlashAttention V4): decode, Q_S = 1.

    ``actual_seq_lengths`` are the KV lengths per batch; ``padding_mask`` is accepted and unused,
    as in torch_npu. P is normalised before P·V, IFA's rounding (FIA-SPEC 25.3). Returns
    attention_out only.
    """
    kwargs = dict(
        padding_mask=padding_mask, atten_mask=atten_mask, pse_shift=pse_shift,
        actual_seq_lengths=actual_seq_lengths, antiquant_scale=antiquant_scale,
        antiquant_offset=antiquant_offset, block_table=block_table, dequant_scale1=dequant_scale1,
        quant_scale1=quant_scale1, dequant_scale2=dequant_scale2, quant_scale2=quant_scale2,
        quant_offset2=quant_offset2, kv_padding_size=kv_padding_size, num_heads=num_heads,
        scale_value=scale_value, input_layout=input_layout, num_key_value_heads=num_key_value_heads,
        block_size=block_size, inner_precise=inner_precise)
    return _dispatch("npu_incre_flash_attention", query, key, value, kwargs, backend, strict, threads, post_quant_rounding)


def npu_prompt_flash_attention(
        query: Array, key: Array, value: Array, *, padding_mask: Optional[Array] = None,
        atten_mask: Optional[Array] = None, pse_shift: Optional[Array] = None, actual_seq_lengths: IntList = None,
        deq_scale1: Optional[Array] = None, quant_scale1: Optional[Array] = None,
        deq_scale2: Optional[Array] = None, quant_scale2: Optional[Array] = None,
        quant_offset2: Optional[Array] = None, num_heads: int = 1, scale_value: float = 1.0,
        pre_tokens: int = INT_MAX, next_tokens: int = 0, input_layout: str = "BSH", num_key_value_heads: int = 0,
        actual_seq_lengths_kv: IntList = None, sparse_mode: int = 0,
        backend: str = "default", strict: bool = False, threads: int = 0,
        post_quant_rounding: str = "device") -> Array:
    """``torch_npu.npu_prompt_flash_attention`` (aclnnPromptFlashAttention V3): prefill.

    Note torch_npu's default ``next_tokens=0``. As torch_npu, runs with inner_precise 1, or 0 for
    ``sparse_mode`` 10-14 (which mean modes 0-4 in high precision); ``padding_mask`` is unused.
    Returns attention_out only.
    """
    kwargs = dict(
        padding_mask=padding_mask, atten_mask=atten_mask, pse_shift=pse_shift,
        actual_seq_lengths=actual_seq_lengths, deq_scale1=deq_scale1, quant_scale1=quant_scale1,
        deq_scale2=deq_scale2, quant_scale2=quant_scale2, quant_offset2=quant_offset2, num_heads=num_heads,
        scale_value=scale_value, pre_tokens=pre_tokens, next_tokens=next_tokens, input_layout=input_layout,
        num_key_value_heads=num_key_value_heads, actual_seq_lengths_kv=actual_seq_lengths_kv,
        sparse_mode=sparse_mode)
    return _dispatch("npu_prompt_flash_attention", query, key, value, kwargs, backend, strict, threads, post_quant_rounding)
