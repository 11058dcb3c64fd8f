"""Output shapes and dtypes of a call without running it (FIA-SPEC 3.1, 17, 19): the fake (meta)
implementations of the torch custom ops, under torch.compile and torch.export, where the inputs
have shapes but no data. The real call must agree (python/tests/test_torch_ops.py checks it over
the shared cases)."""
from typing import Any, List, Optional, Sequence, Tuple

_TOKEN = ("TND", "NTD")


def _layouts(input_layout: str) -> Tuple[str, str]:
    parts = input_layout.split("_")
    return parts[0], parts[-1]


def _axes(layout: str, shape: Sequence[Any], num_heads: int) -> Tuple[Any, Any, Any, Any]:
    """(B, S or T, N, D) of a tensor in `layout`; B is None for TND/NTD."""
    if layout == "BSH":
        return shape[0], shape[1], num_heads, shape[2] // num_heads
    if layout == "BSND":
        return shape[0], shape[1], shape[2], shape[3]
    if layout == "BNSD":
        return shape[0], shape[2], shape[1], shape[3]
    if layout == "TND":
        return None, shape[0], shape[1], shape[2]
    if layout == "NTD":
        return None, shape[1], shape[0], shape[2]
    raise ValueError(layout)


def _in_layout(layout: str, b: Any, s: Any, n: Any, d: Any) -> List[Any]:
    return {
        "BSH": lambda: [b, s, n * d], "BSND": lambda: [b, s, n, d], "BNSD": lambda: [b, n, s, d],
        "NBSD": lambda: [n, b, s, d], "TND": lambda: [s, n, d], "NTD": lambda: [n, s, d],
    }[layout]()


def outputs(query_shape: Sequence[Any], query_dtype: str, value_shape: Sequence[Any], value_dtype: str,
            attrs: dict, paged: bool, post_quant: bool, query_rope_dtype: Optional[str]
            ) -> Tuple[List[Any], str, Optional[List[Any]]]:
    """(attention_out shape, its dtype name, softmax_lse shape or None when not requested).

    `attrs` by FiaArgs name (see _calls.to_fia); `paged`: a block_table is given; `post_quant`:
    quant_scale2 is given (int8 output, FIA-SPEC 14). dtype names as in fia ("F16", "I8", ...)."""
    in_layout, out_layout = _layouts(attrs.get("input_layout", "BSH"))
    num_heads = max(attrs.get("num_heads", 1), 1)
    kv_heads = attrs.get("num_key_value_heads", 0) or num_heads
    b, s, n, d = _axes(in_layout, query_shape, num_heads)
    numel = 1
    for x in query_shape:
        numel *= x
    if numel == 0:  # FIA-SPEC 19: an empty query returns at once, with its own head dim
        v_d = d
    else:
        fused = len(value_shape) == 3 and (paged or in_layout == "BSH")
        v_d = value_shape[-1] // kv_heads if fused else value_shape[-1]
        if value_dtype == "I32":  # eight int4 per int32 (FIA-SPEC 12.6)
            v_d = v_d * 8
    if in_layout in _TOKEN:
        out_shape, lse_shape = _in_layout(out_layout, None, s, n, v_d), [s, n, 1]
    else:
        out_shape, lse_shape = _in_layout(out_layout, b, s, n, v_d), [b, n, s, 1]
    if post_quant:
        out_dtype = "I8"
    elif query_dtype == "I8":
        out_dtype = query_rope_dtype or "F16"
    else:
        out_dtype = query_dtype
    return out_shape, out_dtype, (lse_shape if attrs.get("softmax_lse_flag", False) else None)
