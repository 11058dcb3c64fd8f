"""Type stubs of fia.torch_npu: the attention functions under torch_npu's names."""
from types import ModuleType

from .functions import (
    npu_fused_infer_attention_score as npu_fused_infer_attention_score,
    npu_fused_infer_attention_score_v2 as npu_fused_infer_attention_score_v2,
    npu_incre_flash_attention as npu_incre_flash_attention,
    npu_prompt_flash_attention as npu_prompt_flash_attention,
)

def install() -> ModuleType: ...
def uninstall() -> None: ...
