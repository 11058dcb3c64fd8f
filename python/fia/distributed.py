"""Context-parallel attention on torch.distributed: ring attention for prefill and sharded decode
(docs/distributed.md; FIA-SPEC 17, the softmax LSE that makes the split exact).

Every rank holds a shard of the sequence. :func:`ring_attention` rotates the key/value shards
around the ring of ranks with point-to-point sends (the next shard travels while fia computes on
the current one) and merges the per-step partial attentions with
:func:`fia.merge_attention_states`; :func:`sharded_decode` runs one fia call per rank over that
rank's part of a request's KV cache and merges the all-gathered partials. Any torch.distributed
backend works (gloo on CPUs). :func:`shard_sequence` / :func:`unshard_sequence` cut a whole
sequence into the shards each rank holds and put them back together, in both shardings:

- ``"zigzag"`` (load-balanced): the sequence is cut into 2W chunks, rank r holds chunks r and
  2W-1-r, so every rank does the same causal work;
- ``"contiguous"``: W chunks, rank r holds chunk r (rank W-1 does W times the causal work of rank 0).

Chunk lengths differ by at most one token: the first ``S % parts`` chunks get one more.
"""
import inspect
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

from . import _calls
from ._ring import decode_row_max, exchange, resized, ring_row_max, settled
from .functions import npu_fused_infer_attention_score
from .merge import merge_attention_states

SHARDINGS = ("zigzag", "contiguous")
P_ROUNDINGS = ("whole_row", "per_step")
LAYOUTS = {"BNSD": 2, "BSND": 1, "BSH": 1}   # input layout -> sequence axis (LSE: always axis 2)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
PASSED_ON = ("num_heads", "num_key_value_heads", "scale", "inner_precise", "backend", "strict", "threads")
EXTRAS = ("backend", "strict", "threads")   # fia's keyword-only extras among them
FIA = "npu_fused_infer_attention_score"     # the function every step calls
FIA_PARAMETERS = frozenset(inspect.signature(npu_fused_infer_attention_score).parameters)
_causal_tile: Optional[torch.Tensor] = None


def _compressed_causal_mask() -> torch.Tensor:
    """The 2048x2048 strict upper triangle that sparse modes 2-4 take (FIA-SPEC 6.2)."""
    global _causal_tile
    if _causal_tile is None:
        _causal_tile = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), 1)
    return _causal_tile


def chunk_lengths(seq_len: int, parts: int) -> List[int]:
    """Lengths of ``parts`` chunks of a ``seq_len``-token sequence: the first ``seq_len % parts``
    chunks get one token more."""
    base, extra = divmod(seq_len, parts)
    return [base + (i < extra) for i in range(parts)]


def _chunks_of_ranks(seq_len: int, world_size: int, sharding: str) -> List[List[Tuple[int, int]]]:
    """Per rank, the (start, length) of the chunks it holds, in sequence order."""
    parts = world_size if sharding == "contiguous" else 2 * world_size
    lengths = chunk_lengths(seq_len, parts)
    starts = [sum(lengths[:i]) for i in range(parts)]
    if sharding == "contiguous":
        return [[(starts[r], lengths[r])] for r in range(world_size)]
    return [[(starts[r], lengths[r]), (starts[parts - 1 - r], lengths[parts - 1 - r])] for r in range(world_size)]


def shard_lengths(seq_len: int, world_size: int, sharding: str = "zigzag") -> List[int]:
    """The number of tokens each rank holds when a ``seq_len``-token sequence is sharded over
    ``world_size`` ranks (``sharding`` "zigzag" or "contiguous"). Errors: ValueError naming
    seq_len, world_size or sharding."""
    _check_sharding(sharding)
    if not isinstance(seq_len, int) or seq_len < 0:
        raise ValueError(f"seq_len: expected an int >= 0, got {seq_len!r}")
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size: expected an int >= 1, got {world_size!r}")
    return [sum(n for _, n in chunks) for chunks in _chunks_of_ranks(seq_len, world_size, sharding)]


def shard_sequence(x: torch.Tensor, rank: int, world_size: int, *, input_layout: str = "BNSD",
                   sharding: str = "zigzag") -> torch.Tensor:
    """The shard of the whole-sequence tensor ``x`` that ``rank`` of ``world_size`` holds.

    ``x``: a query, key, value or output in ``input_layout`` ("BNSD", "BSND" or "BSH"; the
    sequence axis is 2 for BNSD, 1 otherwise), or an LSE (B, N, S, 1) with ``input_layout="BNSD"``.
    Returns a new tensor with the rank's chunks concatenated in sequence order (zigzag: chunk r,
    then chunk 2W-1-r). Errors: ValueError naming rank, world_size, input_layout or sharding.
    """
    axis = _seq_axis(input_layout)
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size: expected an int >= 1, got {world_size!r}")
    if not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank: expected an int in [0, {world_size}), got {rank!r}")
    _check_sharding(sharding)
    chunks = _chunks_of_ranks(x.shape[axis], world_size, sharding)[rank]
    return torch.cat([x.narrow(axis, start, n) for start, n in chunks], axis)


def unshard_sequence(shards: Sequence[torch.Tensor], *, input_layout: str = "BNSD",
                     sharding: str = "zigzag") -> torch.Tensor:
    """The whole-sequence tensor from ``shards[r]``, the shard of rank r (the inverse of
    :func:`shard_sequence`). Errors: ValueError naming shards (lengths that do not follow the
    sharding), input_layout or sharding."""
    axis = _seq_axis(input_layout)
    _check_sharding(sharding)
    world_size = len(shards)
    if world_size == 0:
        raise ValueError("shards: expected one tensor per rank, got none")
    seq_len = sum(s.shape[axis] for s in shards)
    ranks = _chunks_of_ranks(seq_len, world_size, sharding)
    got = [s.shape[axis] for s in shards]
    if got != [sum(n for _, n in chunks) for chunks in ranks]:
        raise ValueError(f"shards: lengths {got} along axis {axis} are not a {sharding} sharding of {seq_len} tokens "
                         f"over {world_size} ranks ({shard_lengths(seq_len, world_size, sharding)})")
    pieces = []
    for shard, chunks in zip(shards, ranks):
        offset = 0
        for start, n in chunks:
            pieces.append((start, shard.narrow(axis, offset, n)))
            offset += n
    return torch.cat([piece for _, piece in sorted(pieces, key=lambda p: p[0])], axis)


def ring_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, group: Any = None,
                   causal: bool = True, sharding: str = "zigzag", input_layout: str = "BNSD",
                   actual_seq_lengths: Optional[Sequence[int]] = None,
                   partial_dtype: Optional[torch.dtype] = torch.float32, p_rounding: str = "whole_row",
                   **fia_kwargs: Any) -> Tuple[torch.Tensor, torch.Tensor]:
    """Ring attention (context parallelism) for prefill: self-attention of a sequence sharded
    over the ranks of ``group``, each rank holding the query, key and value of the same tokens.

    - query (B, N, S_r, D) / key, value (B, N_kv, S_r, D_k / D_v) in BNSD, or BSND / BSH
      (``input_layout``), float16, bfloat16 or float32 (key and value of query's dtype), CPU
      tensors; S_r is this rank's shard length, ``shard_lengths(S, W, sharding)[r]`` for causal
      zig-zag (:func:`shard_sequence` cuts them), any length >= 1 otherwise. The shard order
      along the sequence is the rank order of ``group`` (the default group when None).
    - causal: query token i sees key tokens j <= i of the whole sequence (per step: sparse_mode 3
      on the shard's own diagonal block, whole blocks below it, blocks above it skipped);
      False: every query sees every key.
    - actual_seq_lengths: B valid lengths of the whole sequence (the same list on every rank;
      tokens from position L_b on are padding, FIA-SPEC 7.1-7.2): padding queries get output 0
      and LSE +inf, padding keys are seen by no query. Shards must then follow ``sharding``
      (:func:`shard_lengths`) when it is "zigzag"; contiguous shards may have any lengths.
    - fia_kwargs: ``num_heads`` (required), ``num_key_value_heads`` (GQA), ``scale``,
      ``inner_precise``, ``backend``, ``strict``, ``threads``, as in
      :func:`fia.npu_fused_infer_attention_score`. Masks, pse and the other FIA inputs are not
      defined over shards here and raise ValueError.
    - partial_dtype: float32 (the default): every step's output stays float32 (fia's
      ``float32_out``) and the running merge is float32, rounded once at the end; None: each step's
      output is rounded to the input dtype before its merge.
    - p_rounding: how a 16-bit call's P is rounded (FIA-SPEC 25.1 #4, 25.3). "whole_row" (the
      default): against the row max over the whole sequence, as the single fia call rounds it; a
      first pass sends the key shards around the ring once more and takes each query row's max
      score (float32 matmuls in torch), which every step gets as fia's ``softmax_max``, so that
      the result equals the single call within criterion A. "per_step": against each step's own
      max (no extra pass; as close to the exact attention, but not rounded as the single call).
      float32 inputs have no P rounding and skip the pass. docs/distributed.md, "Accuracy".

    Every step is fia calls with ``softmax_lse_flag=True``; the key/value shard of the next step
    is sent to rank r+1 and received from rank r-1 (isend/irecv) while fia computes. The partials
    are merged in a fixed order (own shard, then ranks r-1, r-2, ...), so results are
    deterministic. Returns (out, lse): out like a fia output (this rank's shard, query's dtype,
    output layout of ``input_layout``), lse float32 (B, N, S_r, 1), natural log (FIA-SPEC 17).
    Collective: every rank of the group must call it with the same arguments apart from the tensors.

    Errors: TypeError (tensors that are not CPU float tensors of one dtype, a causal that is not a
    bool, an unknown keyword), ValueError naming the parameter (query/key/value shapes and shard
    lengths, input_layout, sharding, group, partial_dtype, p_rounding, an FIA argument not
    supported here).
    """
    axis = _seq_axis(input_layout)
    _check_sharding(sharding)
    if not isinstance(causal, bool):
        raise TypeError(f"causal: expected a bool, got {type(causal).__name__}")
    _check_tensors(query=query, key=key, value=value)
    kwargs = _fia_kwargs("ring_attention", fia_kwargs)
    float32_out = _float32_out(partial_dtype, query.dtype)
    whole_row = _whole_row(p_rounding, query.dtype)
    local = query.shape[axis]
    if key.shape[axis] != local or value.shape[axis] != local:
        raise ValueError(f"key: this rank's key/value shards hold {key.shape[axis]}/{value.shape[axis]} tokens, "
                         f"its query shard {local}: ring_attention needs query and key/value of the same tokens")
    world, rank = _world(group)
    lengths = _all_lengths(local, group, world)
    if min(lengths) < 1:
        raise ValueError(f"query: every rank must hold at least one token; shard lengths per rank: {lengths}")
    first = None
    if sharding == "zigzag" and (causal or actual_seq_lengths is not None):
        expected = shard_lengths(sum(lengths), world, "zigzag")
        if lengths != expected:
            raise ValueError(f"query: shard lengths per rank {lengths} are not the zigzag sharding of {sum(lengths)} "
                             f"tokens over {world} ranks ({expected}); cut them with fia.distributed.shard_sequence")
        first = chunk_lengths(sum(lengths), 2 * world)[:world]
    valid = _valid_lengths(actual_seq_lengths, query.shape[0], lengths, sharding)

    def calls(src: int):
        """(first query row, query rows, key tokens, fia keywords) of each fia call on the shard of src."""
        for q_start, q_len, kv_len, diagonal in _ring_blocks(rank, src, lengths, first, causal):
            kw = dict(kwargs, input_layout=input_layout)
            if diagonal:
                kw.update(sparse_mode=3, atten_mask=_compressed_causal_mask())
            if valid is not None:
                # (a query block of one row takes FIA's legacy decode path, which ignores
                # actual_seq_lengths but honours actual_seq_lengths_kv = 0: FIA-SPEC 25.1 #2, #17)
                kw["actual_seq_lengths"] = [min(max(n - q_start, 0), q_len) for n in valid[rank]]
                kw["actual_seq_lengths_kv"] = [min(n, kv_len) if m else 0
                                               for n, m in zip(valid[src], kw["actual_seq_lengths"])]
            yield q_start, q_len, kv_len, kw

    # fia's errors before any communication: every rank's own block is a call like the others
    # (the diagonal one with the causal mask), planned without running it.
    for q_start, q_len, kv_len, kw in calls(rank):
        _plan(query.narrow(axis, q_start, q_len), key.narrow(axis, 0, kv_len), value.narrow(axis, 0, kv_len), kw)
    row_max = None
    if whole_row:
        row_max = ring_row_max(query, key, kwargs, input_layout, calls, rank, world, lengths, group)
    out = lse = None
    k_cur, v_cur = key.contiguous(), value.contiguous()
    for step in range(world):
        src = (rank - step) % world
        pending, k_next, v_next = [], None, None
        if step < world - 1:
            k_next, v_next = (resized(t, axis, lengths[(src - 1) % world]) for t in (k_cur, v_cur))
            pending = exchange((k_cur, v_cur), (k_next, v_next), rank, world, group)
        with settled(pending):
            for q_start, q_len, kv_len, kw in calls(src):
                floor = None if row_max is None else row_max[:, :, q_start:q_start + q_len, None].contiguous()
                part, part_lse = _step(query.narrow(axis, q_start, q_len), k_cur.narrow(axis, 0, kv_len),
                                       v_cur.narrow(axis, 0, kv_len), kw, float32_out, floor)
                if out is None:
                    out, lse = part, part_lse
                elif q_len == local:
                    out, lse = merge_attention_states(out, lse, part, part_lse, input_layout)
                else:
                    rows, rows_lse = out.narrow(axis, q_start, q_len), lse.narrow(2, q_start, q_len)
                    merged, merged_lse = merge_attention_states(rows, rows_lse, part, part_lse, input_layout)
                    rows.copy_(merged)
                    rows_lse.copy_(merged_lse)
        k_cur, v_cur = k_next, v_next
    return out.to(query.dtype), lse


def sharded_decode(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, group: Any = None,
                   input_layout: str = "BSH", block_table: Optional[torch.Tensor] = None, block_size: int = 0,
                   actual_seq_lengths_kv: Optional[Sequence[int]] = None,
                   partial_dtype: Optional[torch.dtype] = torch.float32, p_rounding: str = "whole_row",
                   **fia_kwargs: Any) -> Tuple[torch.Tensor, torch.Tensor]:
    """Decode (one new token per request) over a KV cache sharded across the ranks of ``group``:
    each rank holds a disjoint part of every request's cached tokens; the result is the attention
    over the union (the order of tokens among ranks does not matter without masks).

    - query: (B, N, 1, D) BNSD, (B, 1, N, D) BSND or (B, 1, N*D) BSH, the same on every rank;
      float16, bfloat16 or float32.
    - key, value: this rank's cache part, query's dtype: contiguous (B, N_kv, S_kv, D) etc. in
      ``input_layout``, with ``actual_seq_lengths_kv`` (B entries, 0 allowed: a rank that holds no
      token of a request contributes nothing) or without (all S_kv tokens); or paged, (blocks,
      block_size, N_kv*D) / (blocks, N_kv, block_size, D) with ``block_table`` (B, max_blocks)
      int32, ``block_size`` and ``actual_seq_lengths_kv`` (required), FIA-SPEC 9.
    - fia_kwargs, partial_dtype and p_rounding: as in :func:`ring_attention`; "whole_row" takes
      each rank's max score per query row (a float32 matmul over its keys) and one all-reduce of
      the B x N maxima before the fia call.

    One fia call per rank with ``softmax_lse_flag=True``, one all-gather of the float32
    (out, lse), then the merge in rank order 0..W-1 on every rank. Returns (out, lse), the same on
    every rank: out like a fia output (query's dtype), lse float32 (B, N, 1, 1); +inf for a request
    with no cached token on any rank, whose output is 0 (FIA-SPEC 17, 25.1).
    Collective: every rank of the group must call it.

    Errors: TypeError (tensor types and dtypes, an unknown keyword), ValueError naming the
    parameter (query with more than one token, input_layout, group, partial_dtype, p_rounding, an
    FIA argument not supported here); fia's own errors for the cache arguments.
    """
    axis = _seq_axis(input_layout)
    _check_tensors(query=query, key=key, value=value)
    if query.shape[axis] != 1:
        raise ValueError(f"query: sharded_decode takes one token per request, got {query.shape[axis]} along the "
                         f"sequence axis of {input_layout}; use ring_attention for prefill")
    kwargs = _fia_kwargs("sharded_decode", fia_kwargs)
    float32_out = _float32_out(partial_dtype, query.dtype)
    whole_row = _whole_row(p_rounding, query.dtype)
    world, _ = _world(group)
    kw = dict(kwargs, input_layout=input_layout, block_table=block_table, block_size=block_size,
              actual_seq_lengths_kv=actual_seq_lengths_kv)
    floor = None
    if whole_row:
        _plan(query, key, value, kw)  # fia's errors before the max pass
        floor = decode_row_max(query, key, kw)
        dist.all_reduce(floor, op=dist.ReduceOp.MAX, group=group)
    out, lse = _step(query, key, value, kw, float32_out, floor)
    packed = torch.cat([out.float().reshape(-1), lse.reshape(-1)])
    gathered = [torch.empty_like(packed) for _ in range(world)]
    dist.all_gather(gathered, packed, group=group)
    dtype = torch.float32 if float32_out else query.dtype
    parts = [(g[:out.numel()].view(out.shape).to(dtype), g[out.numel():].view(lse.shape)) for g in gathered]
    out, lse = parts[0]
    for part, part_lse in parts[1:]:
        out, lse = merge_attention_states(out, lse, part, part_lse, input_layout)
    return out.to(query.dtype), lse


def _step(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, kw: Dict[str, Any], float32_out: bool,
          softmax_max: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
    """One fia call with softmax_lse_flag=True and the partial-attention options."""
    args, extras = _split(kw)
    return _calls.execute(FIA, query, key, value, dict(args, softmax_lse_flag=True), float32_out=float32_out,
                          softmax_max=softmax_max, **extras)


def _plan(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, kw: Dict[str, Any]) -> None:
    """Validates one step's fia call without running it: fia's errors, before any communication."""
    args, extras = _split(kw)
    _calls.plan(FIA, query, key, value, args, **extras)


def _split(kw: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(fia's arguments, its keyword-only extras) of a step's keywords; the extras checked
    (TypeError naming a wrong one)."""
    args = {name: x for name, x in kw.items() if name not in EXTRAS}
    extras = _calls.normalize_extras(kw.get("backend", "default"), kw.get("strict", False), kw.get("threads", 0),
                                     "device")
    return args, extras


def _ring_blocks(rank: int, src: int, lengths: List[int], first: Optional[List[int]], causal: bool
                 ) -> List[Tuple[int, int, int, bool]]:
    """The fia calls of rank ``rank`` on the key/value shard of rank ``src``: (first query row,
    query rows, key tokens from the shard's start, causal diagonal block?). Zig-zag (``first``:
    the length of each rank's first chunk): a shard from a lower rank is seen by all queries up
    to its first chunk; one from a higher rank is seen whole by the second query chunk only."""
    own, theirs = lengths[rank], lengths[src]
    if not causal:
        return [(0, own, theirs, False)]
    if src == rank:
        return [(0, own, own, True)]
    if first is None:
        return [(0, own, theirs, False)] if src < rank else []
    if src < rank:
        return [(0, own, first[src], False)]
    return [(first[rank], own - first[rank], theirs, False)] if own > first[rank] else []


def _valid_lengths(actual_seq_lengths: Optional[Sequence[int]], batch: int, lengths: List[int], sharding: str
                   ) -> Optional[List[List[int]]]:
    """Per rank, per batch: how many of the rank's tokens lie before the batch's actual length
    (always a prefix of the shard: its chunks are in sequence order)."""
    if actual_seq_lengths is None:
        return None
    seq_len = sum(lengths)
    given = [int(n) for n in actual_seq_lengths]
    if len(given) != batch or any(not 0 <= n <= seq_len for n in given):
        raise ValueError(f"actual_seq_lengths: expected {batch} lengths (the query's batch) in [0, {seq_len}], the "
                         f"whole sequence's, got {given}")
    if sharding == "contiguous":
        chunks = [[(sum(lengths[:r]), n)] for r, n in enumerate(lengths)]
    else:
        chunks = _chunks_of_ranks(seq_len, len(lengths), "zigzag")
    return [[sum(min(max(n - start, 0), size) for start, size in rank_chunks) for n in given] for rank_chunks in chunks]


def _world(group: Any) -> Tuple[int, int]:
    if not dist.is_available() or not dist.is_initialized():
        raise ValueError("group: torch.distributed is not initialized (call torch.distributed.init_process_group, "
                         "e.g. under torchrun)")
    rank = dist.get_rank(group)
    if rank < 0:
        raise ValueError("group: this process is not a member of the group")
    return dist.get_world_size(group), rank


def _all_lengths(local: int, group: Any, world: int) -> List[int]:
    mine = torch.tensor([local], dtype=torch.int64)
    every = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every, mine, group=group)
    return [int(t) for t in every]


def _seq_axis(input_layout: Any) -> int:
    if input_layout not in LAYOUTS:
        raise ValueError(f"input_layout: expected one of {sorted(LAYOUTS)}, got {input_layout!r}")
    return LAYOUTS[input_layout]


def _check_sharding(sharding: Any) -> None:
    if sharding not in SHARDINGS:
        raise ValueError(f"sharding: expected one of {SHARDINGS}, got {sharding!r}")


def _check_tensors(**tensors: Any) -> None:
    dtype = tensors["query"].dtype if isinstance(tensors["query"], torch.Tensor) else None
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
            raise TypeError(f"{name}: expected a torch CPU tensor, got {type(t).__name__}")
        if t.dtype not in DTYPES:
            raise TypeError(f"{name}: expected float16, bfloat16 or float32, got {t.dtype}")
        if t.dtype != dtype:
            raise TypeError(f"{name}: expected query's dtype {dtype}, got {t.dtype}")


def _float32_out(partial_dtype: Any, input_dtype: torch.dtype) -> bool:
    """partial_dtype float32: the steps' outputs in float32 (for a 16-bit input, fia's float32_out);
    None or the input dtype: in the input dtype."""
    if partial_dtype is None or partial_dtype == input_dtype:
        return False
    if partial_dtype != torch.float32:
        raise ValueError(f"partial_dtype: expected torch.float32 or None (the input dtype), got {partial_dtype!r}")
    return True


def _whole_row(p_rounding: Any, input_dtype: torch.dtype) -> bool:
    """True when the steps need the whole row's max: p_rounding "whole_row" on 16-bit inputs."""
    if p_rounding not in P_ROUNDINGS:
        raise ValueError(f"p_rounding: expected one of {P_ROUNDINGS}, got {p_rounding!r}")
    return p_rounding == "whole_row" and input_dtype != torch.float32


def _fia_kwargs(function: str, fia_kwargs: Dict[str, Any]) -> Dict[str, Any]:
    for name in fia_kwargs:
        if name not in FIA_PARAMETERS:
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r}")
        if name not in PASSED_ON:
            raise ValueError(f"{name}: {function} does not take this FIA argument (it is not defined over sequence "
                             f"shards or {function} sets it itself); it passes on {', '.join(PASSED_ON)}")
    if "num_heads" not in fia_kwargs:
        raise ValueError(f"num_heads: {function} needs the number of query heads, as fia does")
    return dict(fia_kwargs)
