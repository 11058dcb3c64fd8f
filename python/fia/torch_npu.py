"""A torch_npu stand-in for running unchanged Ascend model code on CPU tensors.

    import fia.torch_npu as torch_npu
    out, lse = torch_npu.npu_fused_infer_attention_score(q, k, v, num_heads=8, input_layout="BNSD")

or, in a test suite (e.g. a conftest.py), before the code under test imports torch_npu:

    import fia.torch_npu
    fia.torch_npu.install()   # `import torch_npu` now gives this module

Only the attention functions exist here; other torch_npu APIs (``tensor.npu()``, ``torch.npu``,
other ``npu_*`` ops) raise AttributeError, naming what is missing.
"""
import sys
from types import ModuleType

from .functions import (
    npu_fused_infer_attention_score,
    npu_fused_infer_attention_score_v2,
    npu_incre_flash_attention,
    npu_prompt_flash_attention,
)

__all__ = [
    "npu_fused_infer_attention_score", "npu_fused_infer_attention_score_v2", "npu_incre_flash_attention",
    "npu_prompt_flash_attention", "install", "uninstall",
]


def install() -> ModuleType:
    """Makes later ``import torch_npu`` statements resolve to this module (sys.modules); returns it.

    Raises RuntimeError if a real torch_npu is already imported (it would keep running on NPU)."""
    this = sys.modules[__name__]
    current = sys.modules.get("torch_npu")
    if current is not None and current is not this:
        raise RuntimeError("torch_npu is already imported; call fia.torch_npu.install() before importing it")
    sys.modules["torch_npu"] = this
    return this


def uninstall() -> None:
    """Undoes install(): a later ``import torch_npu`` looks for the real package again."""
    if sys.modules.get("torch_npu") is sys.modules[__name__]:
        del sys.modules["torch_npu"]


def __getattr__(name: str):
    raise AttributeError(f"fia.torch_npu provides only the attention functions ({', '.join(__all__[:4])}); "
                         f"torch_npu.{name} is not available on CPU")
