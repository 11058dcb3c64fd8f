"""From torch_npu's arguments to one fia call (FIA-SPEC 2.1), and running it.

Each torch_npu function names FIA's inputs its own way (``scale`` / ``softmax_scale`` /
``scale_value``, ``dequant_scale_key`` for ``key_antiquant_scale``, ...). ``to_fia`` renames them
onto the C++ ``fia::FiaArgs`` fields (the torch_npu v1 names) and applies each entry point's fixed
choices, as torch_npu's op plugin does before calling aclnn; ``execute`` plans and runs the call.
"""
import re
from typing import Any, Dict, NoReturn, Tuple

from . import _C
from . import _arrays
from .errors import UnsupportedFeatureError, from_status

INT_MAX = 2147483647

# FiaArgs tensor fields (the torch_npu v1 names); "key" and "value" are lists.
TENSOR_FIELDS = frozenset((
    "query", "key", "value", "pse_shift", "atten_mask", "dequant_scale1", "quant_scale1", "dequant_scale2",
    "quant_scale2", "quant_offset2", "antiquant_scale", "antiquant_offset", "block_table", "query_padding_size",
    "kv_padding_size", "key_antiquant_scale", "key_antiquant_offset", "value_antiquant_scale",
    "value_antiquant_offset", "key_shared_prefix", "value_shared_prefix", "query_rope", "key_rope",
    "key_rope_antiquant_scale", "dequant_scale_query", "learnable_sink",
))

# torch_npu name -> FiaArgs name, per function (names not listed are the same).
RENAMES = {
    "npu_fused_infer_attention_score": {},
    "npu_fused_infer_attention_score_v2": {
        "actual_seq_qlen": "actual_seq_lengths", "actual_seq_kvlen": "actual_seq_lengths_kv",
        "dequant_scale_key": "key_antiquant_scale", "dequant_offset_key": "key_antiquant_offset",
        "dequant_scale_value": "value_antiquant_scale", "dequant_offset_value": "value_antiquant_offset",
        "dequant_scale_key_rope": "key_rope_antiquant_scale", "quant_scale_out": "quant_scale2",
        "quant_offset_out": "quant_offset2", "num_query_heads": "num_heads", "softmax_scale": "scale",
        "key_quant_mode": "key_antiquant_mode", "value_quant_mode": "value_antiquant_mode",
        "return_softmax_lse": "softmax_lse_flag",
    },
    # IFA's actual_seq_lengths are the KV lengths (aclnnIncreFlashAttention).
    "npu_incre_flash_attention": {"actual_seq_lengths": "actual_seq_lengths_kv", "scale_value": "scale"},
    "npu_prompt_flash_attention": {"deq_scale1": "dequant_scale1", "deq_scale2": "dequant_scale2",
                                   "scale_value": "scale"},
}
ENTRY_POINTS = {
    "npu_fused_infer_attention_score": "fia", "npu_fused_infer_attention_score_v2": "fia",
    "npu_incre_flash_attention": "ifa", "npu_prompt_flash_attention": "pfa",
}
# Arguments torch_npu accepts and does not pass on: IFA/PFA's padding_mask, v2's quant_scale_p
# (reserved on Atlas A2/A3, where the V4 operator has no slot for it).
IGNORED = {"padding_mask", "quant_scale_p"}
# v2's dtype overrides: for FP8/HiFloat8 inputs of newer chips; fia has none.
V2_DTYPE_OVERRIDES = frozenset((
    "query_dtype", "key_dtype", "value_dtype", "query_rope_dtype", "key_rope_dtype", "key_shared_prefix_dtype",
    "value_shared_prefix_dtype", "dequant_scale_query_dtype", "dequant_scale_key_dtype",
    "dequant_scale_value_dtype", "dequant_scale_key_rope_dtype", "out_dtype",
))


# Attributes by torch_npu name (every function) and their Python types; every other keyword is a tensor.
INT_LISTS = {"actual_seq_lengths", "actual_seq_lengths_kv", "actual_shared_prefix_len", "actual_seq_qlen",
             "actual_seq_kvlen"}
SCALARS = {
    **{n: int for n in ("num_heads", "pre_tokens", "next_tokens", "num_key_value_heads", "sparse_mode",
                        "inner_precise", "block_size", "antiquant_mode", "key_antiquant_mode", "value_antiquant_mode",
                        "query_quant_mode", "num_query_heads", "key_quant_mode", "value_quant_mode", "threads")},
    "scale": float, "softmax_scale": float, "scale_value": float, "input_layout": str, "backend": str,
    "softmax_lse_flag": bool, "return_softmax_lse": bool, "strict": bool,
}


def normalize(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """kwargs with every attribute checked and made a plain Python value (ArgumentTypeError when
    one has the wrong type): int lists as lists of int, numpy scalars as int / float / bool."""
    out = {}
    for name, v in kwargs.items():
        if name in SCALARS:
            v = _arrays.scalar(v, SCALARS[name], name)
        elif v is None:  # an absent optional input
            pass
        elif name in INT_LISTS:
            v = _arrays.int_list(v, name)
        elif name in V2_DTYPE_OVERRIDES:
            v = _arrays.scalar(v, int, name)
        out[name] = v
    return out


def normalize_extras(backend: Any, strict: Any, threads: Any, post_quant_rounding: Any) -> Dict[str, Any]:
    """The keyword-only extras of every function, checked as normalize() checks attributes."""
    return {"backend": _arrays.scalar(backend, str, "backend"), "strict": _arrays.scalar(strict, bool, "strict"),
            "threads": _arrays.scalar(threads, int, "threads"),
            "post_quant_rounding": _arrays.scalar(post_quant_rounding, str, "post_quant_rounding")}


def to_fia(function: str, query: Any, key: Any, value: Any, kwargs: Dict[str, Any]
           ) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(tensors, attrs) by FiaArgs name for a call of torch_npu `function`. `kwargs` are checked as
    normalize() checks them, in one pass (the eager calls' hot path): attributes first, then the
    inputs query, key, value and the others in order."""
    renames = RENAMES[function]
    attrs: Dict[str, Any] = {}
    later = []  # (name, value) of the inputs (and the rest), after every attribute
    for name, v in kwargs.items():
        kind = SCALARS.get(name)
        if kind is not None:
            if type(v) is not kind:
                v = _arrays.scalar(v, kind, name)
        elif v is None or name in IGNORED:  # absent inputs stay absent
            continue
        elif name in INT_LISTS:
            v = _arrays.int_list(v, name)
        else:
            later.append((name, v))
            continue
        attrs[renames.get(name, name)] = v
    tensors: Dict[str, Any] = {
        "query": _arrays.as_input(query, "query"),
        "key": _arrays.as_input_list(key, "key"),
        "value": _arrays.as_input_list(value, "value"),
    }
    for name, v in later:
        if name in V2_DTYPE_OVERRIDES:
            _arrays.scalar(v, int, name)
            raise UnsupportedFeatureError("unsupported", name,
                                          "dtype overrides (FP8 / HiFloat8 inputs) are not supported, got " + repr(v))
        field = renames.get(name, name)
        if field in TENSOR_FIELDS:
            tensors[field] = _arrays.as_input(v, name)
        else:
            attrs[field] = v
    if function == "npu_prompt_flash_attention":
        # torch_npu: sparse_mode 10..14 selects high precision (inner_precise 0) for modes 0..4.
        mode = attrs.get("sparse_mode", 0)
        attrs["inner_precise"] = 0 if 10 <= mode <= 14 else 1
        attrs["sparse_mode"] = mode - 10 if 10 <= mode <= 14 else mode
    return tensors, attrs


def execute(function: str, query: Any, key: Any, value: Any, kwargs: Dict[str, Any], backend: str = "default",
            strict: bool = False, threads: int = 0, post_quant_rounding: str = "device", float32_out: bool = False,
            softmax_max: Any = None) -> Tuple[Any, Any]:
    """Checks, plans and runs one call; returns (attention_out, softmax_lse) in the query's framework.
    float32_out and softmax_max (float32, softmax_lse's shape) are fia::Options' partial-attention
    extensions, for fia.distributed (docs/distributed.md)."""
    if (type(backend) is not str or type(strict) is not bool or type(threads) is not int
            or type(post_quant_rounding) is not str):
        backend, strict, threads, post_quant_rounding = normalize_extras(
            backend, strict, threads, post_quant_rounding).values()
    tensors, attrs = to_fia(function, query, key, value, kwargs)
    if softmax_max is not None:
        softmax_max = _arrays.as_input(softmax_max, "softmax_max")
    try:
        out, lse = _C.call(ENTRY_POINTS[function], tensors, attrs, backend, strict, threads, post_quant_rounding,
                           float32_out, softmax_max)
    except _C.StatusError as err:
        raise_as_called(function, err)
    return _arrays.outputs(query, out, lse)


def plan(function: str, query: Any, key: Any, value: Any, kwargs: Dict[str, Any], backend: str = "default",
         strict: bool = False, threads: int = 0, post_quant_rounding: str = "device") -> "_C.Call":
    """The planned call itself (benchmarks); raises as execute() does."""
    tensors, attrs = to_fia(function, query, key, value, kwargs)
    try:
        return _C.plan(ENTRY_POINTS[function], tensors, attrs, backend, strict, threads, post_quant_rounding)
    except _C.StatusError as err:
        raise_as_called(function, err)


def raise_as_called(function: str, err: "_C.StatusError") -> NoReturn:
    """Raises the library's error with the parameter named as `function` names it (v2's
    num_query_heads, IFA's actual_seq_lengths, PFA's deq_scale1, ...), in the message too."""
    code, parameter, message = err.args
    inverse = {fia_name: name for name, fia_name in RENAMES[function].items()}
    if inverse:
        # only the names with an underscore: a bare "scale" is also an English word in messages
        words = [w for w in inverse if "_" in w]
        if words:
            pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(words, key=len, reverse=True))) + r")\b")
            message = pattern.sub(lambda m: inverse[m.group(1)], message)
        parameter = inverse.get(parameter, parameter)
    raise from_status(code, parameter, message) from None
