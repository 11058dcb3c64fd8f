"""The torch custom ops ``torch.ops.fia.<name>`` (torch.library), with fake implementations, so
that the fia functions work under ``torch.compile(fullgraph=True)`` and ``torch.export``.

Schemas are torch_npu's (op-plugin ``op_plugin_functions.yaml``) with these changes: ``key`` and
``value`` are ``Tensor[]`` (one tensor, or the tensor list of FIA-SPEC 10); v1 also takes V4's
``dequant_scale_query``, ``learnable_sink`` and ``query_quant_mode``; and three keyword-only
extras (``backend``, ``strict``, ``threads``) end every list.
"""
from typing import Any

import torch

from . import _arrays, _calls, _shapes, merge

_EXTRAS = 'str backend="default", bool strict=False, int threads=0, str post_quant_rounding="device"'

SCHEMAS = {
    "npu_fused_infer_attention_score": (
        "(Tensor query, Tensor[] key, Tensor[] value, *, Tensor? pse_shift=None, Tensor? atten_mask=None, "
        "SymInt[]? actual_seq_lengths=None, SymInt[]? actual_seq_lengths_kv=None, Tensor? dequant_scale1=None, "
        "Tensor? quant_scale1=None, Tensor? dequant_scale2=None, Tensor? quant_scale2=None, "
        "Tensor? quant_offset2=None, Tensor? antiquant_scale=None, Tensor? antiquant_offset=None, "
        "Tensor? key_antiquant_scale=None, Tensor? key_antiquant_offset=None, Tensor? value_antiquant_scale=None, "
        "Tensor? value_antiquant_offset=None, Tensor? block_table=None, Tensor? query_padding_size=None, "
        "Tensor? kv_padding_size=None, Tensor? key_shared_prefix=None, Tensor? value_shared_prefix=None, "
        "SymInt[]? actual_shared_prefix_len=None, Tensor? query_rope=None, Tensor? key_rope=None, "
        "Tensor? key_rope_antiquant_scale=None, Tensor? dequant_scale_query=None, Tensor? learnable_sink=None, "
        "int num_heads=1, float scale=1.0, int pre_tokens=2147483647, "
        'int next_tokens=2147483647, str input_layout="BSH", int num_key_value_heads=0, int sparse_mode=0, '
        "int inner_precise=0, int block_size=0, int antiquant_mode=0, int key_antiquant_mode=0, "
        "int value_antiquant_mode=0, bool softmax_lse_flag=False, int query_quant_mode=0, " + _EXTRAS
        + ") -> (Tensor, Tensor)"),
    "npu_fused_infer_attention_score_v2": (
        "(Tensor query, Tensor[] key, Tensor[] value, *, Tensor? query_rope=None, Tensor? key_rope=None, "
        "Tensor? pse_shift=None, Tensor? atten_mask=None, SymInt[]? actual_seq_qlen=None, "
        "SymInt[]? actual_seq_kvlen=None, Tensor? block_table=None, Tensor? dequant_scale_query=None, "
        "Tensor? dequant_scale_key=None, Tensor? dequant_offset_key=None, Tensor? dequant_scale_value=None, "
        "Tensor? dequant_offset_value=None, Tensor? dequant_scale_key_rope=None, Tensor? quant_scale_out=None, "
        "Tensor? quant_offset_out=None, Tensor? quant_scale_p=None, Tensor? learnable_sink=None, "
        "int num_query_heads=1, int num_key_value_heads=0, float softmax_scale=1.0, int pre_tokens=2147483647, "
        'int next_tokens=2147483647, str input_layout="BSH", int sparse_mode=0, int block_size=0, '
        "int query_quant_mode=0, int key_quant_mode=0, int value_quant_mode=0, int inner_precise=0, "
        "bool return_softmax_lse=False, int? query_dtype=None, int? key_dtype=None, int? value_dtype=None, "
        "int? query_rope_dtype=None, int? key_rope_dtype=None, int? key_shared_prefix_dtype=None, "
        "int? value_shared_prefix_dtype=None, int? dequant_scale_query_dtype=None, "
        "int? dequant_scale_key_dtype=None, int? dequant_scale_value_dtype=None, "
        "int? dequant_scale_key_rope_dtype=None, int? out_dtype=None, " + _EXTRAS + ") -> (Tensor, Tensor)"),
    "npu_incre_flash_attention": (
        "(Tensor query, Tensor[] key, Tensor[] value, *, Tensor? padding_mask=None, Tensor? atten_mask=None, "
        "Tensor? pse_shift=None, SymInt[]? actual_seq_lengths=None, Tensor? antiquant_scale=None, "
        "Tensor? antiquant_offset=None, Tensor? block_table=None, Tensor? dequant_scale1=None, "
        "Tensor? quant_scale1=None, Tensor? dequant_scale2=None, Tensor? quant_scale2=None, "
        "Tensor? quant_offset2=None, Tensor? kv_padding_size=None, int num_heads=1, float scale_value=1.0, "
        'str input_layout="BSH", int num_key_value_heads=0, int block_size=0, int inner_precise=1, '
        + _EXTRAS + ") -> Tensor"),
    "npu_prompt_flash_attention": (
        "(Tensor query, Tensor[] key, Tensor[] value, *, Tensor? padding_mask=None, Tensor? atten_mask=None, "
        "Tensor? pse_shift=None, int[]? actual_seq_lengths=None, Tensor? deq_scale1=None, "
        "Tensor? quant_scale1=None, Tensor? deq_scale2=None, Tensor? quant_scale2=None, "
        "Tensor? quant_offset2=None, int num_heads=1, float scale_value=1.0, int pre_tokens=2147483647, "
        'int next_tokens=0, str input_layout="BSH", int num_key_value_heads=0, '
        "int[]? actual_seq_lengths_kv=None, int sparse_mode=0, " + _EXTRAS + ") -> Tensor"),
}



def _returns(function: str, out: Any, lse: Any) -> Any:
    return (out, lse) if function.startswith("npu_fused") else out


def _register(function: str) -> None:
    _LIB.define(function + SCHEMAS[function])
    # The dispatcher passes a kernel only the keyword arguments that differ from the schema's
    # defaults: put torch_npu's defaults back (PFA's next_tokens=0 is not the library's default).
    schema = getattr(torch.ops.fia, function).default._schema
    defaults = {a.name: a.default_value for a in schema.arguments
                if a.kwarg_only and a.has_default_value() and a.name not in ("backend", "strict", "threads", "post_quant_rounding")}

    def impl(query, key, value, *, backend="default", strict=False, threads=0, post_quant_rounding="device", **kwargs):
        out, lse = _calls.execute(function, query, key, value, {**defaults, **kwargs}, backend, strict, threads,
                                  post_quant_rounding)
        return _returns(function, out, lse)

    def fake(query, key, value, *, backend="default", strict=False, threads=0, post_quant_rounding="device", **kwargs):
        renames = _calls.RENAMES[function]
        named = {renames.get(k, k): v for k, v in {**defaults, **kwargs}.items()}
        rope = named.get("query_rope")
        out_shape, out_dtype, lse_shape = _shapes.outputs(
            query.shape, _arrays.dtype_name(query), value[0].shape, _arrays.dtype_name(value[0]), named,
            named.get("block_table") is not None, named.get("quant_scale2") is not None,
            _arrays.dtype_name(rope) if rope is not None else None)
        out = query.new_empty(out_shape, dtype=_arrays.torch_dtype(out_dtype))
        if lse_shape is None:
            lse = query.new_empty((1,), dtype=torch.float32)
        else:
            lse = query.new_empty(lse_shape, dtype=torch.float32)
        return _returns(function, out, lse)

    _LIB.impl(function, impl, "CPU")
    torch.library.register_fake("fia::" + function, fake, lib=_LIB)


def _merge(out_a, lse_a, out_b, lse_b, input_layout="BNSD"):
    return merge.merge_into_new(out_a, lse_a, out_b, lse_b, input_layout)


def _merge_fake(out_a, lse_a, out_b, lse_b, input_layout="BNSD"):
    return torch.empty_like(out_a), torch.empty_like(lse_a)


# torch.library.custom_op cannot take keyword-only tensors, which torch_npu's schemas have: the
# ops are defined on a Library, with a CPU kernel and a fake kernel each.
_LIB = torch.library.Library("fia", "DEF")
for _function in SCHEMAS:
    _register(_function)
_LIB.define('merge_attention_states(Tensor out_a, Tensor lse_a, Tensor out_b, Tensor lse_b, str input_layout="BNSD")'
            " -> (Tensor, Tensor)")
_LIB.impl("merge_attention_states", _merge, "CPU")
torch.library.register_fake("fia::merge_attention_states", _merge_fake, lib=_LIB)
