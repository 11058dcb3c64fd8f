"""Type stubs of fia.distributed: ring attention and sharded decode on torch.distributed."""
from typing import Any, List, Optional, Sequence, Tuple

import torch

SHARDINGS: Tuple[str, ...]
P_ROUNDINGS: Tuple[str, ...]
LAYOUTS: dict

def chunk_lengths(seq_len: int, parts: int) -> List[int]: ...
def shard_lengths(seq_len: int, world_size: int, sharding: str = "zigzag") -> List[int]: ...
def shard_sequence(x: torch.Tensor, rank: int, world_size: int, *, input_layout: str = "BNSD",
                   sharding: str = "zigzag") -> torch.Tensor: ...
def unshard_sequence(shards: Sequence[torch.Tensor], *, input_layout: str = "BNSD",
                     sharding: str = "zigzag") -> torch.Tensor: ...
def ring_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, group: Any = None,
                   causal: bool = True, sharding: str = "zigzag", input_layout: str = "BNSD",
                   actual_seq_lengths: Optional[Sequence[int]] = None,
                   partial_dtype: Optional[torch.dtype] = ..., p_rounding: str = "whole_row", **fia_kwargs: Any
                   ) -> Tuple[torch.Tensor, torch.Tensor]: ...
def sharded_decode(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, group: Any = None,
                   input_layout: str = "BSH", block_table: Optional[torch.Tensor] = None, block_size: int = 0,
                   actual_seq_lengths_kv: Optional[Sequence[int]] = None,
                   partial_dtype: Optional[torch.dtype] = ..., p_rounding: str = "whole_row", **fia_kwargs: Any
                   ) -> Tuple[torch.Tensor, torch.Tensor]: ...
