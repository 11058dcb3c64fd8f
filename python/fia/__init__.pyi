"""Type stubs of the fia package."""
from .errors import (
    ArgumentTypeError as ArgumentTypeError,
    DtypeError as DtypeError,
    FiaError as FiaError,
    InvalidArgumentError as InvalidArgumentError,
    UnsupportedFeatureError as UnsupportedFeatureError,
)
from .functions import (
    npu_fused_infer_attention_score as npu_fused_infer_attention_score,
    npu_fused_infer_attention_score_v2 as npu_fused_infer_attention_score_v2,
    npu_incre_flash_attention as npu_incre_flash_attention,
    npu_prompt_flash_attention as npu_prompt_flash_attention,
)
from . import distributed as distributed
from .merge import merge_attention_states as merge_attention_states

__version__: str
