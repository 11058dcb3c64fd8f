"""Type stubs of fia._C, the nanobind extension (src/python/module.cpp)."""
from typing import Any, Dict, Optional, Tuple

class StatusError(Exception):
    """args: (code name, parameter, message) of a failed fia::Status."""

class Call:
    """A validated FIA call (fia::Plan) with the arrays it reads."""
    def time_cpp_calls(self, repeats: int) -> float: ...

def plan(entry_point: str, tensors: Dict[str, Any], attrs: Dict[str, Any], backend: str, strict: bool,
         threads: int, post_quant_rounding: str) -> Call: ...
def call(entry_point: str, tensors: Dict[str, Any], attrs: Dict[str, Any], backend: str, strict: bool,
         threads: int, post_quant_rounding: str, float32_out: bool = False,
         softmax_max: Optional[Any] = None) -> Tuple[Any, Any]:
    """(attention_out, softmax_lse) as new numpy arrays; bfloat16 as (uint16 array, "BF16").
    float32_out, softmax_max: fia::Options' partial-attention extensions (docs/distributed.md)."""
def merge_attention_states(out_a: Any, lse_a: Any, out_b: Any, lse_b: Any, input_layout: str, out: Any,
                           lse: Any) -> None: ...
