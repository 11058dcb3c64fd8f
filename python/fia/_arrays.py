"""Inputs and outputs of the fia functions: torch CPU tensors or numpy arrays, never copied.

Inputs reach the C++ core without a copy: plain torch CPU tensors as their data address, shape,
strides and dtype name (beside the tensor, which the core keeps alive); numpy arrays and other
DLPack objects as they are, through DLPack / the buffer protocol; numpy bfloat16 arrays as uint16
views with the dtype name beside them; tensor subclasses as numpy views. The attention outputs are
numpy arrays the core allocates, returned as torch tensors over the same memory for a torch query;
the merge's outputs are allocated here, in the framework of its inputs.
"""
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .errors import ArgumentTypeError, DtypeError, InvalidArgumentError

try:  # bfloat16 for numpy users (optional)
    import ml_dtypes

    _NP_BF16: Optional[np.dtype] = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - exercised only without ml_dtypes
    _NP_BF16 = None

_NP_DTYPES = {
    "F16": np.float16, "F32": np.float32, "F64": np.float64, "I8": np.int8, "U8": np.uint8,
    "BOOL": np.bool_, "I32": np.int32, "I64": np.int64, "U64": np.uint64,
}


_TORCH: Any = None
_TENSOR: Any = None  # torch.Tensor, once torch is imported
_TORCH_DTYPES: Dict[Any, str] = {}  # torch dtype -> fia dtype name, once torch is imported


def torch_module() -> Any:
    """torch when it has been imported by the process (fia never imports it for numpy users)."""
    global _TORCH, _TENSOR, _TORCH_DTYPES
    if _TORCH is None:
        _TORCH = sys.modules.get("torch")
        if _TORCH is not None:
            _TENSOR = _TORCH.Tensor
            _TORCH_DTYPES = {getattr(_TORCH, t): n for t, n in _TORCH_DTYPE_NAMES}
    return _TORCH


def is_torch_tensor(x: Any) -> bool:
    torch = _TORCH if _TORCH is not None else torch_module()
    return torch is not None and isinstance(x, torch.Tensor)


def as_input(x: Any, name: str) -> Any:
    """An argument for the core: a numpy array or DLPack object; (uint16 view, "BF16") for numpy
    bfloat16; (tensor, data address, shape, strides, dtype name) for a plain torch CPU tensor."""
    if _TENSOR is None:
        torch_module()
    if type(x) is _TENSOR:  # a plain torch tensor, the common case, first
        # The tensor's own attributes: after a long call, when torch's code is out of the caches,
        # they cost half of a numpy view (Tensor.numpy(); bench/python_overhead.py).
        dtype = _TORCH_DTYPES.get(x.dtype)
        if dtype is not None and x.is_cpu:
            try:
                return (x, x.data_ptr(), x.shape, x.stride(), dtype)
            except RuntimeError:  # no strided memory (sparse layouts, ...)
                pass
    if x is None:
        return None
    if isinstance(x, np.ndarray):
        if _NP_BF16 is not None and x.dtype == _NP_BF16:
            return (x.view(np.uint16), "BF16")
        if x.dtype.byteorder == ">":
            raise DtypeError("invalid argument", name, f"dtype must be native-endian, got {x.dtype}")
        return x
    if is_torch_tensor(x):  # tensor subclasses, other devices, layouts and dtypes fia lacks
        if x.device.type != "cpu":
            raise InvalidArgumentError("invalid argument", name, f"a CPU tensor is expected, got a tensor on {x.device}")
        if x.is_nested or x.layout != _TORCH.strided:
            kind = "a nested tensor" if x.is_nested else f"layout {x.layout}"
            raise InvalidArgumentError("invalid argument", name, f"a dense (strided) tensor is expected, got {kind}")
        return torch_view(x.detach() if x.requires_grad else x, name)
    if hasattr(x, "__dlpack__"):
        return x
    raise InvalidArgumentError("invalid argument", name,
                               f"a CPU tensor or array is expected, got {type(x).__name__}")


def torch_view(x: Any, name: str) -> Any:
    """A CPU tensor as a numpy view of its memory (no copy): the core imports numpy arrays several
    times faster than torch's DLPack capsules. bfloat16 travels as (uint16 view, "BF16"). For
    tensor subclasses and the merge's outputs (as_input passes plain tensors by address)."""
    torch = torch_module()
    if x.dtype == torch.bfloat16:
        return (x.view(torch.int16).numpy().view(np.uint16), "BF16")
    try:
        return x.numpy()
    except (TypeError, RuntimeError):  # dtypes numpy lacks (float8, complex views, ...)
        raise DtypeError("invalid argument", name, f"dtype must be one fia takes (F16, BF16, F32, I8, U8, BOOL, "
                                                   f"I32, I64, U64), got {x.dtype}") from None


def as_input_list(x: Any, name: str) -> List[Any]:
    """key / value: one tensor, or a list of B tensors of batch 1 (tensor list, FIA-SPEC 10)."""
    if isinstance(x, (list, tuple)):
        return [as_input(t, name) for t in x]
    return [as_input(x, name)]


def int_list(x: Any, name: str) -> Optional[List[int]]:
    """actual_seq_lengths and friends: None, a sequence of ints, or a 1-D integer tensor/array."""
    if x is None:
        return None
    if is_torch_tensor(x) or isinstance(x, np.ndarray):
        if x.ndim != 1:
            raise InvalidArgumentError("invalid argument", name, f"a list of ints is expected, got shape {tuple(x.shape)}")
        x = x.tolist()
    if not isinstance(x, (list, tuple)):
        raise ArgumentTypeError("invalid argument", name, f"a list of ints is expected, got {type(x).__name__}")
    for v in x:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ArgumentTypeError("invalid argument", name, f"a list of ints is expected, got the element {v!r}")
    return [int(v) for v in x]


def scalar(x: Any, kind: type, name: str) -> Any:
    """An int, float, bool or str attribute as that Python type; numpy scalars are accepted."""
    if type(x) is kind:
        return x
    if kind is bool:
        ok = isinstance(x, (bool, np.bool_))
    elif kind is int:
        ok = isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))
    elif kind is float:
        ok = isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))
    else:
        ok = isinstance(x, kind)
    if not ok:
        raise ArgumentTypeError("invalid argument", name, f"{kind.__name__} is expected, got {x!r}")
    return kind(x)


def empty(like: Any, shape: Sequence[int], dtype: str) -> Tuple[Any, Any]:
    """(array for the caller, argument for the core) of `shape` and dtype name, in `like`'s framework."""
    if is_torch_tensor(like):
        if dtype != "BF16":  # numpy memory under a torch tensor: lighter than torch.empty
            arr = np.empty(tuple(shape), dtype=_NP_DTYPES[dtype])
            return _TORCH.from_numpy(arr), arr
        out = _TORCH.empty(tuple(shape), dtype=_TORCH.bfloat16)
        return out, torch_view(out, "attention_out")
    if dtype == "BF16":
        if _NP_BF16 is None:
            raise DtypeError("invalid argument", "query", "numpy bfloat16 needs the ml_dtypes package")
        out = np.empty(tuple(shape), dtype=_NP_BF16)
        return out, (out.view(np.uint16), "BF16")
    out = np.empty(tuple(shape), dtype=_NP_DTYPES[dtype])
    return out, out


def outputs(like: Any, out: Any, lse: Any) -> Tuple[Any, Any]:
    """The core's new numpy outputs in `like`'s framework: torch tensors over the same memory for a
    torch query. A bfloat16 attention_out arrives as (uint16 array, "BF16")."""
    bf16 = type(out) is tuple
    if bf16:
        out = out[0]
    if is_torch_tensor(like):
        out = _TORCH.from_numpy(out)
        return (out.view(_TORCH.bfloat16) if bf16 else out), _TORCH.from_numpy(lse)
    if bf16:
        if _NP_BF16 is None:
            raise DtypeError("invalid argument", "query", "numpy bfloat16 needs the ml_dtypes package")
        out = out.view(_NP_BF16)
    return out, lse


# torch dtype attribute -> fia dtype name
_TORCH_DTYPE_NAMES = (("float16", "F16"), ("bfloat16", "BF16"), ("float32", "F32"), ("float64", "F64"),
                      ("int8", "I8"), ("uint8", "U8"), ("bool", "BOOL"), ("int32", "I32"), ("int64", "I64"))


def torch_dtype(name: str) -> Any:
    """The torch dtype of a fia dtype name."""
    return next(getattr(torch_module(), t) for t, n in _TORCH_DTYPE_NAMES if n == name)


def dtype_name(x: Any) -> str:
    """fia's name of an array's element type ("F16", "BF16", "F32", ...); "?" when it has none."""
    if is_torch_tensor(x):
        return next((n for t, n in _TORCH_DTYPE_NAMES if getattr(_TORCH, t) == x.dtype), "?")
    if _NP_BF16 is not None and x.dtype == _NP_BF16:
        return "BF16"
    for name, t in _NP_DTYPES.items():
        if x.dtype == t:
            return name
    return "?"
