"""The ring of fia.distributed: point-to-point exchange of shards, and the row-max pass of
p_rounding "whole_row" (each query row's max score over the whole sequence, which every fia step
then takes as softmax_max so that P is rounded as the single call rounds it; FIA-SPEC 25.1 #4,
docs/distributed.md "Accuracy")."""
import contextlib
from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch
import torch.distributed as dist

SCORE_BLOCK_BYTES = 32 << 20                # the float32 scores of one block of the row-max pass


def bnsd(x: torch.Tensor, layout: str, heads: int) -> torch.Tensor:
    """A query/key/value in ``layout`` as a float32 (B, N, S, D) tensor."""
    if layout == "BSH":
        x = x.unflatten(-1, (heads, -1))
    if layout != "BNSD":
        x = x.transpose(1, 2)
    return x.float()


def scores(q: torch.Tensor, k: torch.Tensor, scale: torch.Tensor, buffer: Optional[torch.Tensor] = None
            ) -> torch.Tensor:
    """The float32 scores (q·k)·scale (B, N, S, L) of q (B, N, S, D) and the keys k (B, N_kv, L,
    D), query head n on KV head n // G (N = G·N_kv). Written into ``buffer`` when it is large
    enough: a reused buffer makes the matmul about twice as fast as fresh memory."""
    B, N, S, D = q.shape
    kv_heads, L = k.shape[1], k.shape[2]
    shape = (B, kv_heads, (N // kv_heads) * S, L)
    out = None if buffer is None or buffer.numel() < B * N * S * L else buffer[:B * N * S * L].view(shape)
    return torch.matmul(q.reshape(shape[:3] + (D,)), k.transpose(-1, -2), out=out).mul_(scale).view(B, N, S, L)


def ring_row_max(query: torch.Tensor, key: torch.Tensor, kwargs: Dict[str, Any], layout: str, calls: Any,
                  rank: int, world: int, lengths: List[int], group: Any) -> torch.Tensor:
    """p_rounding "whole_row": per query row of this rank (B, N, S_r) the max of its float32
    scores over every key of the sequence it sees (-inf where none), with the visibility of the
    ring's fia calls (``calls(src)``); the key shards travel around the ring once (isend/irecv
    overlapping the matmuls). Score blocks of at most SCORE_BLOCK_BYTES, in one reused buffer; on
    the causal diagonal a block of rows reads only the keys up to its last row."""
    heads = kwargs["num_heads"]
    kv_heads = kwargs.get("num_key_value_heads") or heads
    scale = torch.tensor(kwargs.get("scale", 1.0), dtype=torch.float32)
    axis = 2 if layout == "BNSD" else 1
    q = bnsd(query, layout, heads)
    B, N, S, _ = q.shape
    row_max = torch.full((B, N, S), float("-inf"))
    buffer = torch.empty(SCORE_BLOCK_BYTES // 4)
    k_cur = key.contiguous()
    for step in range(world):
        src = (rank - step) % world
        pending, k_next = [], None
        if step < world - 1:
            k_next = resized(k_cur, axis, lengths[(src - 1) % world])
            pending = exchange((k_cur,), (k_next,), rank, world, group)
        with settled(pending):
            k = bnsd(k_cur, layout, kv_heads)
            for q_start, q_len, kv_len, kw in calls(src):
                valid = kw.get("actual_seq_lengths_kv", [kv_len] * B)
                diagonal = "sparse_mode" in kw  # the shard's own block: key j <= query row i
                rows = max(1, SCORE_BLOCK_BYTES // max(1, 4 * B * N * kv_len))
                for r0 in range(0, q_len, rows):
                    r1 = min(r0 + rows, q_len)
                    keys = min(kv_len, r1) if diagonal else kv_len
                    if keys == 0:
                        continue
                    s = scores(q[:, :, q_start + r0:q_start + r1], k[:, :, :keys], scale, buffer)
                    if diagonal and r0 + 1 < keys:  # the triangle above the diagonal in the last columns
                        i, j = torch.arange(r0, r1)[:, None], torch.arange(r0, keys)[None, :]
                        s[..., r0:keys].masked_fill_(j > i, float("-inf"))
                    for b, n in enumerate(valid):
                        if n < keys:
                            s[b, :, :, n:] = float("-inf")
                    torch.maximum(row_max[:, :, q_start + r0:q_start + r1], s.amax(-1),
                                  out=row_max[:, :, q_start + r0:q_start + r1])
        k_cur = k_next
    return row_max


def _request_keys(key: torch.Tensor, b: int, kw: Dict[str, Any], kv_heads: int) -> torch.Tensor:
    """Request b's cached keys of a sharded_decode call as float32 (1, N_kv, L, D): contiguous in
    the query's layout, or paged (blocks, block_size, N_kv*D), (blocks, N_kv, block_size, D) or
    NZ (blocks, N_kv, D/D0, block_size, D0) (FIA-SPEC 9.1)."""
    table, lengths = kw["block_table"], kw["actual_seq_lengths_kv"]
    if table is None:
        k = bnsd(key[b:b + 1], kw["input_layout"], kv_heads)
        return k if lengths is None else k[:, :, :int(lengths[b])]
    n, size = int(lengths[b]), int(kw["block_size"])
    blocks = key[table[b, :-(-n // size)].long()]
    if key.dim() == 3:  # (blocks, block_size, N_kv * D)
        k = blocks.reshape(-1, kv_heads, key.shape[-1] // kv_heads).transpose(0, 1)
    elif key.dim() == 4:  # (blocks, N_kv, block_size, D)
        k = blocks.transpose(0, 1).reshape(kv_heads, -1, key.shape[-1])
    else:  # NZ: element d of a token row at (d // D0, token, d % D0)
        k = blocks.permute(1, 0, 3, 2, 4).reshape(kv_heads, -1, key.shape[2] * key.shape[4])
    return k[None, :, :n].float()


def decode_row_max(query: torch.Tensor, key: torch.Tensor, kw: Dict[str, Any]) -> torch.Tensor:
    """p_rounding "whole_row" for sharded_decode: this rank's max score per (request, head) as the
    (B, N, 1, 1) float32 softmax_max (-inf where it holds no key of the request)."""
    heads = kw["num_heads"]
    kv_heads = kw.get("num_key_value_heads") or heads
    scale = torch.tensor(kw.get("scale", 1.0), dtype=torch.float32)
    q = bnsd(query, kw["input_layout"], heads)
    maxima = torch.full(q.shape[:3], float("-inf"))
    for b in range(q.shape[0]):
        k = _request_keys(key, b, kw, kv_heads)
        if k.shape[2] > 0:
            maxima[b] = scores(q[b:b + 1], k, scale)[0].amax(-1)
    return maxima[..., None]


def exchange(send: Tuple[torch.Tensor, ...], recv: Tuple[torch.Tensor, ...], rank: int, world: int, group: Any
              ) -> List[Any]:
    """isend ``send`` to the next rank and irecv ``recv`` from the previous one; the works."""
    nxt, prev = _global_rank(group, (rank + 1) % world), _global_rank(group, (rank - 1) % world)
    works = [dist.irecv(t, src=prev, group=group) for t in recv]
    return works + [dist.isend(t, dst=nxt, group=group) for t in send]


@contextlib.contextmanager
def settled(works: List[Any]) -> Iterator[None]:
    """Waits for the point-to-point ``works`` when the block ends, also when it raises: a step
    that fails (on every rank alike) must not leave sends and receives pending, or the group's
    next collective would hang."""
    try:
        yield
    finally:
        for work in works:
            work.wait()


def resized(t: torch.Tensor, axis: int, n: int) -> torch.Tensor:
    shape = list(t.shape)
    shape[axis] = n
    return torch.empty(shape, dtype=t.dtype)


def _global_rank(group: Any, rank: int) -> int:
    return rank if group is None or group is dist.group.WORLD else dist.get_global_rank(group, rank)
