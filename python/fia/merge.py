"""merge_attention_states: two partial attentions over disjoint key sets -> the attention over
their union (ring / context-parallel attention, FIA-SPEC 17), exactly."""
from typing import Any, Tuple

from . import _C
from . import _arrays
from .errors import raise_from

try:
    import torch
except ImportError:  # numpy-only installations
    torch = None


def merge_attention_states(out_a: Any, lse_a: Any, out_b: Any, lse_b: Any, input_layout: str = "BNSD"
                           ) -> Tuple[Any, Any]:
    """Combines (out_a, lse_a) and (out_b, lse_b), two fia results for the same queries over
    disjoint key sets (each from a call with ``softmax_lse_flag=True``), into (out, lse) over the
    union: lse = log(exp(lse_a) + exp(lse_b)), out = out_a·exp(lse_a - lse) + out_b·exp(lse_b - lse),
    in float64, rounded once to the outputs' dtype.

    - out_a, out_b: float16, bfloat16 or float32, same shape, in the output layout of
      ``input_layout`` (any FIA layout string, e.g. "BNSD", "BSH", "TND", "BNSD_BSND"; FIA-SPEC 3.1).
    - lse_a, lse_b: float32, natural log, as FIA returns them: (B, N, S, 1), or (T, N, 1) for
      TND/NTD (FIA-SPEC 17). +inf marks a row with no visible key: merging with such a row returns
      the other part unchanged, bit for bit.
    - A learnable sink (FIA-SPEC 16) must be given to one of the two calls only.

    Returns (out, lse), new arrays in the framework of out_a (torch tensors or numpy arrays).
    Errors: fia.InvalidArgumentError / fia.DtypeError naming out_a, lse_a, out_b, lse_b or
    input_layout (shapes or dtypes that do not match, an unknown layout).
    """
    if torch is not None and isinstance(out_a, torch.Tensor):
        return torch.ops.fia.merge_attention_states(out_a, lse_a, out_b, lse_b, input_layout)
    return merge_into_new(out_a, lse_a, out_b, lse_b, input_layout)


def merge_into_new(out_a: Any, lse_a: Any, out_b: Any, lse_b: Any, input_layout: str) -> Tuple[Any, Any]:
    """The merge into newly allocated outputs (the real implementation of the torch op too)."""
    dtype = _arrays.dtype_name(out_a)
    out, out_arg = _arrays.empty(out_a, tuple(out_a.shape), dtype)
    lse, lse_arg = _arrays.empty(out_a, tuple(lse_a.shape), "F32")
    try:
        _C.merge_attention_states(_arrays.as_input(out_a, "out_a"), _arrays.as_input(lse_a, "lse_a"),
                                  _arrays.as_input(out_b, "out_b"), _arrays.as_input(lse_b, "lse_b"),
                                  input_layout, out_arg, lse_arg)
    except _C.StatusError as err:
        raise_from(err)
    return out, lse
