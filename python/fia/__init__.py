"""fia: Ascend's FusedInferAttentionScore (FIA) on CPUs, called as torch_npu calls it.

    import torch, fia
    out, lse = fia.npu_fused_infer_attention_score(q, k, v, num_heads=32, input_layout="BNSD",
                                                  scale=0.125, softmax_lse_flag=True)

Functions (torch_npu's names, keywords and defaults; torch or numpy arrays in and out):
:func:`npu_fused_infer_attention_score`, :func:`npu_fused_infer_attention_score_v2`,
:func:`npu_incre_flash_attention`, :func:`npu_prompt_flash_attention`; and
:func:`merge_attention_states` for partial attentions over disjoint key sets. ``import
fia.torch_npu as torch_npu`` gives the same functions as a torch_npu stand-in. The semantics are
FIA-SPEC's (docs/python.md). :mod:`fia.distributed` shards attention over the ranks of a
torch.distributed group (ring attention, sharded decode; docs/distributed.md).
"""
from ._version import __version__
from .errors import ArgumentTypeError, DtypeError, FiaError, InvalidArgumentError, UnsupportedFeatureError
from .functions import (
    npu_fused_infer_attention_score,
    npu_fused_infer_attention_score_v2,
    npu_incre_flash_attention,
    npu_prompt_flash_attention,
)
from .merge import merge_attention_states

try:
    from . import distributed  # context parallelism on torch.distributed (needs torch)
except ImportError:  # numpy-only installations
    pass

__all__ = [
    "__version__", "FiaError", "InvalidArgumentError", "DtypeError", "ArgumentTypeError", "UnsupportedFeatureError",
    "npu_fused_infer_attention_score", "npu_fused_infer_attention_score_v2", "npu_incre_flash_attention",
    "npu_prompt_flash_attention", "merge_attention_states",
]
