"""Type stubs of fia.merge (FIA-SPEC 17)."""
from typing import Tuple, TypeVar, Union

import numpy
import torch

ArrayT = TypeVar("ArrayT", torch.Tensor, numpy.ndarray)

def merge_attention_states(out_a: ArrayT, lse_a: ArrayT, out_b: ArrayT, lse_b: ArrayT,
                           input_layout: str = "BNSD") -> Tuple[ArrayT, ArrayT]: ...
def merge_into_new(out_a: ArrayT, lse_a: ArrayT, out_b: ArrayT, lse_b: ArrayT,
                   input_layout: str) -> Tuple[ArrayT, ArrayT]: ...
