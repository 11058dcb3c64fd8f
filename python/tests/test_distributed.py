"""fia.distributed (docs/distributed.md): ring attention and sharded decode on 2 and 4 gloo
processes on localhost, each rank's result equal to the single-process fia call on the whole
sequence (its shard of it) within criterion A, LSE within 1e-4; the shard helpers; argument errors.

One group of processes per world size runs every case (spawning costs seconds); a case that hangs
fails through the group's timeout instead of blocking the run."""
import json
import os
import socket
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import fia
import fia._ring
import fia.distributed
from fia.distributed import ring_attention, shard_lengths, shard_sequence, sharded_decode, unshard_sequence
from judge import criterion_a, lse_match

NAMES = {torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32"}
TIMEOUT_S = 120


def randn(seed, *shape, dtype):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def whole_calls(q, k, v, **kw):
    """The single-process fia call on the whole sequence (out, lse) and, from the float64
    reference on the same inputs in float32, the exact attention and the attention over |V|."""
    out, lse = fia.npu_fused_infer_attention_score(q, k, v, softmax_lse_flag=True, **kw)
    exact, _ = fia.npu_fused_infer_attention_score(q.float(), k.float(), v.float(), backend="reference", **kw)
    abs_v, _ = fia.npu_fused_infer_attention_score(q.float(), k.float(), v.float().abs(), backend="reference", **kw)
    return out, lse, (exact, abs_v)


def compare(out, lse, single, single_lse, exact, abs_v, p_rounding="whole_row"):
    """'' when the sharded (out, lse) equal the single-process call's, else what failed: lse within
    1e-4; out within criterion A of the single call's. With p_rounding "per_step" a 16-bit result
    rounds P against each step's max, not the whole row's as the single call does (FIA-SPEC
    25.1 #4): its out is then within criterion A's tolerance plus the bound of a P rounding,
    u·(P·|V|), of the exact attention, and within twice that bound of the single call's
    (docs/distributed.md)."""
    if out.dtype != single.dtype or out.shape != single.shape:
        return f"out {out.dtype} {tuple(out.shape)} != {single.dtype} {tuple(single.shape)}"
    name = NAMES[out.dtype]
    failure = lse_match(lse.numpy(), single_lse.numpy())
    if name == "F32" or p_rounding == "whole_row" or failure:
        return failure or criterion_a(out.float().numpy(), single.float().numpy(), name)
    atol, rtol = {"F16": (2.5e-5, 0.005), "BF16": (1e-4, 2.0 ** -7)}[name]
    u = 2.0 ** -11 if name == "F16" else 2.0 ** -8
    for what, other, bounds in (("the exact attention", exact, 1), ("the single call", single, 2)):
        diff = (out.double() - other.double()).abs()
        bad = int((diff > atol + rtol * other.double().abs() + bounds * u * abs_v.double()).sum())
        if bad:
            return f"{bad} elements further from {what} than {bounds} P rounding(s) allow"
    return ""


def prefill(rank, world, *, seq, dtype, layout, causal, sharding, heads=4, kv_heads=2, dim=32, lengths=None,
            valid=None, p_rounding="whole_row", spread=1.0):
    """Ring attention over a whole sequence of ``seq`` tokens (``lengths``: contiguous shard
    lengths per rank instead of the even cut; ``valid``: the actual length of each of the two
    batches, the padding keys after it 600 in every element, so that a padding key taken into a
    row max would leave every E of the row below float32's range) against the single-process
    call. ``spread`` scales query and key: scores spread^2 times as far apart, so that some steps
    see only keys some 100 below the row's max (E below float32's normal range)."""
    shapes = {"BNSD": lambda n: (2, n, seq, dim), "BSND": lambda n: (2, seq, n, dim), "BSH": lambda n: (2, seq, n * dim)}
    q, k, v = (randn(seed, *shapes[layout](n), dtype=dtype) for seed, n in ((1, heads), (2, kv_heads), (3, kv_heads)))
    q, k = (x * spread for x in (q, k))
    for b, n in enumerate(valid or []):
        k[b].narrow(1 if layout == "BNSD" else 0, n, seq - n).fill_(600.0)
    kw = dict(num_heads=heads, num_key_value_heads=kv_heads, scale=dim ** -0.5, input_layout=layout, threads=1)
    mask = dict(sparse_mode=3, atten_mask=torch.triu(torch.ones(2048, 2048, dtype=torch.bool), 1)) if causal else {}
    actual = dict(actual_seq_lengths=valid, actual_seq_lengths_kv=valid) if valid else {}
    whole, whole_lse, (exact, abs_v) = whole_calls(q, k, v, **kw, **mask, **actual)
    if lengths is None:
        def cut(x, lay):
            return shard_sequence(x, rank, world, input_layout=lay, sharding=sharding)
    else:
        def cut(x, lay):
            return x.narrow(2 if lay == "BNSD" else 1, sum(lengths[:rank]), lengths[rank])
    kw.pop("input_layout")
    out, lse = ring_attention(cut(q, layout), cut(k, layout), cut(v, layout), causal=causal, sharding=sharding,
                              input_layout=layout, actual_seq_lengths=valid, p_rounding=p_rounding, **kw)
    return compare(out, lse, cut(whole, layout), cut(whole_lse, "BNSD"), cut(exact, layout), cut(abs_v, layout),
                   p_rounding)


def decode(rank, world, *, dtype, paged, lengths, heads=8, kv_heads=2, dim=32, block_size=16, layout="BSH",
           p_rounding="whole_row"):
    """Sharded decode: request b's ``lengths[b]`` cached tokens are dealt out to the ranks in
    uneven contiguous pieces (rank r gets piece r of a cut in proportion 1 : 2 : ... : W). Paged
    caches are (blocks, block_size, N_kv*D) for BSH, (blocks, N_kv, block_size, D) for BNSD;
    cached positions after a rank's tokens hold 600 (see prefill()), unused blocks NaN."""
    batch, max_len = len(lengths), max(lengths)
    q = randn(4, batch, 1, heads * dim, dtype=dtype)
    k, v = (randn(seed, batch, max_len, kv_heads * dim, dtype=dtype) for seed in (5, 6))
    kw = dict(num_heads=heads, num_key_value_heads=kv_heads, scale=dim ** -0.5, threads=1)
    whole, whole_lse, (exact, abs_v) = whole_calls(q, k, v, actual_seq_lengths_kv=lengths, input_layout="BSH", **kw)
    weights = [r + 1 for r in range(world)]
    cuts = [[n * sum(weights[:r]) // sum(weights) for r in range(world + 1)] for n in lengths]
    mine = [c[rank + 1] - c[rank] for c in cuts]
    width = max(max(mine), 1)
    k_part, v_part = (torch.full((batch, width, kv_heads * dim), fill, dtype=dtype) for fill in (600.0, 0.0))
    for b, c in enumerate(cuts):
        k_part[b, :mine[b]] = k[b, c[rank]:c[rank + 1]]
        v_part[b, :mine[b]] = v[b, c[rank]:c[rank + 1]]
    kw.update(p_rounding=p_rounding, input_layout=layout)
    if layout == "BNSD":  # (B, N, 1, D) query; every output comes back in BNSD
        q = q.view(batch, 1, heads, dim).transpose(1, 2)
        whole, exact, abs_v = (x.view(batch, 1, heads, dim).transpose(1, 2) for x in (whole, exact, abs_v))
    if not paged:
        if layout == "BNSD":
            k_part, v_part = (x.view(batch, width, kv_heads, dim).transpose(1, 2) for x in (k_part, v_part))
        out, lse = sharded_decode(q, k_part, v_part, actual_seq_lengths_kv=mine, **kw)
        return compare(out, lse, whole, whole_lse, exact, abs_v, p_rounding)
    per_request = -(-width // block_size)
    order = torch.randperm(batch * per_request, generator=torch.Generator().manual_seed(7 + rank))
    table = order.reshape(batch, per_request).to(torch.int32)
    k_cache, v_cache = (torch.full((batch * per_request, block_size, kv_heads * dim), float("nan"), dtype=dtype)
                        for _ in range(2))
    padded = per_request * block_size
    for part, cache in ((k_part, k_cache), (v_part, v_cache)):
        full = torch.full((batch, padded, kv_heads * dim), 600.0, dtype=dtype)  # padding keys: see prefill()
        full[:, :width] = part
        cache[table.flatten().long()] = full.reshape(batch * per_request, block_size, -1)
    if layout == "BNSD":
        k_cache, v_cache = (x.view(-1, block_size, kv_heads, dim).transpose(1, 2).contiguous()
                            for x in (k_cache, v_cache))
    if paged == "nz":  # (blocks, N_kv, D/16, block_size, 16), FIA-SPEC 9.1
        k_cache, v_cache = (x.view(-1, block_size, kv_heads, dim // 16, 16).permute(0, 2, 3, 1, 4).contiguous()
                            for x in (k_cache, v_cache))
    out, lse = sharded_decode(q, k_cache, v_cache, block_table=table, block_size=block_size,
                              actual_seq_lengths_kv=mine, **kw)
    return compare(out, lse, whole, whole_lse, exact, abs_v, p_rounding)


def small_score_blocks(case, score_block_bytes=2048):
    """``case`` with the row-max pass cut into blocks of one or two query rows (fia._ring's
    SCORE_BLOCK_BYTES), so that its diagonal masks and length masks meet block boundaries."""
    def run(rank, world):
        saved, fia._ring.SCORE_BLOCK_BYTES = fia._ring.SCORE_BLOCK_BYTES, score_block_bytes
        try:
            return case(rank, world)
        finally:
            fia._ring.SCORE_BLOCK_BYTES = saved
    return run


def error_then_valid_call(rank, world):
    """Calls that fail on every rank leave no send or receive pending: the next call on the group
    runs (its first collective would hang otherwise). One is rejected by fia before any
    communication; in the other the second fia step raises, with the exchange of the next shard
    posted."""
    q = randn(1, 1, 2, 6, 16, dtype=torch.bfloat16)
    try:
        ring_attention(q, q, q, num_heads=2, causal=False, sharding="contiguous", inner_precise=9, threads=1)
        return "no error for inner_precise=9"
    except ValueError as err:
        if not str(err).startswith("inner_precise"):
            return f"wrong error: {err}"
    step, calls = fia.distributed._step, []

    def failing_step(*args):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("step failed")
        return step(*args)
    fia.distributed._step = failing_step
    try:
        ring_attention(q, q, q, num_heads=2, causal=False, sharding="contiguous", threads=1)
        return "no error from the failing step"
    except RuntimeError:
        pass
    finally:
        fia.distributed._step = step
    out, _ = ring_attention(q, q, q, num_heads=2, causal=False, sharding="contiguous", threads=1)
    return "" if out.shape == q.shape else f"out shape {tuple(out.shape)}"


def fia_errors_come_first(rank, world):
    """An argument fia rejects raises fia's error (not a torch error from the row-max pass)."""
    q = randn(1, 1, 8, 48, dtype=torch.bfloat16)  # BSH hidden 48: not a multiple of 5 heads
    try:
        ring_attention(q, q, q, num_heads=5, input_layout="BSH", causal=False, sharding="contiguous", threads=1)
    except ValueError as err:
        return "" if str(err).startswith("num_heads:") else f"wrong message: {err}"
    except Exception as err:  # noqa: BLE001 - reported to the test
        return f"{type(err).__name__}: {err}"
    return "no error"


def bad_zigzag_lengths(rank, world):
    """Shards that are not the zig-zag cut: every rank raises ValueError naming query."""
    q = randn(1, 1, 2, 3 + 2 * rank, 16, dtype=torch.float32)
    try:
        ring_attention(q, q, q, num_heads=2, causal=True, sharding="zigzag", threads=1)
    except ValueError as err:
        return "" if str(err).startswith("query:") else f"wrong message: {err}"
    return "no ValueError"


CASES = {
    "causal_zigzag_f16_gqa_bnsd": lambda r, w: prefill(r, w, seq=24 * w, dtype=torch.float16, layout="BNSD",
                                                        causal=True, sharding="zigzag"),
    "causal_zigzag_uneven_bf16_bsh": lambda r, w: prefill(r, w, seq=20 * w + 3, dtype=torch.bfloat16, layout="BSH",
                                                           causal=True, sharding="zigzag"),
    "causal_contiguous_f32_bsnd": lambda r, w: prefill(r, w, seq=18 * w, dtype=torch.float32, layout="BSND",
                                                       causal=True, sharding="contiguous", heads=4, kv_heads=4),
    "causal_contiguous_uneven_f16": lambda r, w: prefill(r, w, seq=sum(range(5, 5 + 13 * w, 13)), dtype=torch.float16,
                                                         layout="BNSD", causal=True, sharding="contiguous",
                                                         lengths=list(range(5, 5 + 13 * w, 13))[::-1]),
    "noncausal_zigzag_bf16_gqa": lambda r, w: prefill(r, w, seq=16 * w + 1, dtype=torch.bfloat16, layout="BNSD",
                                                      causal=False, sharding="zigzag", heads=8, kv_heads=2),
    "noncausal_contiguous_f32": lambda r, w: prefill(r, w, seq=10 * w, dtype=torch.float32, layout="BSH",
                                                     causal=False, sharding="contiguous"),
    "causal_zigzag_actual_lengths_f16": lambda r, w: prefill(r, w, seq=12 * w + 1, dtype=torch.float16,
                                                             layout="BSH", causal=True, sharding="zigzag",
                                                             valid=[12 * w - 6, 5]),
    "noncausal_contiguous_actual_lengths_bf16": lambda r, w: prefill(r, w, seq=9 * w, dtype=torch.bfloat16,
                                                                     layout="BNSD", causal=False,
                                                                     sharding="contiguous", valid=[9 * w, 4]),
    "causal_contiguous_uneven_actual_lengths_f32": lambda r, w: prefill(
        r, w, seq=sum(range(1, 1 + 7 * w, 7)), dtype=torch.float32, layout="BSND", causal=True,
        sharding="contiguous", lengths=list(range(1, 1 + 7 * w, 7)), valid=[0, 9]),
    "noncausal_one_token_shard_actual_lengths_f16": lambda r, w: prefill(
        r, w, seq=6 * w - 5, dtype=torch.float16, layout="BSND", causal=False, sharding="contiguous",
        lengths=[6] * (w - 1) + [1], valid=[6 * w - 6, 6 * w - 5]),
    "decode_contiguous_f16": lambda r, w: decode(r, w, dtype=torch.float16, paged=False, lengths=[70, 3, 41]),
    "decode_contiguous_bf16_empty_request": lambda r, w: decode(r, w, dtype=torch.bfloat16, paged=False,
                                                                lengths=[55, 0, 1]),
    "decode_paged_f16": lambda r, w: decode(r, w, dtype=torch.float16, paged=True, lengths=[90, 17, 2]),
    "decode_paged_bf16": lambda r, w: decode(r, w, dtype=torch.bfloat16, paged=True, lengths=[33, 64]),
    "decode_paged_bnsd_bf16": lambda r, w: decode(r, w, dtype=torch.bfloat16, paged=True, lengths=[47, 5, 80],
                                                  layout="BNSD"),
    "decode_contiguous_bnsd_f16": lambda r, w: decode(r, w, dtype=torch.float16, paged=False, lengths=[19, 66],
                                                      layout="BNSD"),
    "causal_zigzag_bf16_per_step": lambda r, w: prefill(r, w, seq=22 * w, dtype=torch.bfloat16, layout="BSND",
                                                        causal=True, sharding="zigzag", p_rounding="per_step"),
    "decode_paged_f16_per_step": lambda r, w: decode(r, w, dtype=torch.float16, paged=True, lengths=[40, 9],
                                                     p_rounding="per_step"),
    "decode_paged_nz_bf16": lambda r, w: decode(r, w, dtype=torch.bfloat16, paged="nz", lengths=[50, 7]),
    "causal_zigzag_bf16_spread_scores": lambda r, w: prefill(r, w, seq=16 * w, dtype=torch.bfloat16, layout="BNSD",
                                                             causal=True, sharding="zigzag", spread=12.0),
    "noncausal_contiguous_f16_spread_scores": lambda r, w: prefill(r, w, seq=12 * w, dtype=torch.float16,
                                                                   layout="BSH", causal=False,
                                                                   sharding="contiguous", spread=10.0),
    "error_then_valid_call": error_then_valid_call,
    "fia_errors_come_first": fia_errors_come_first,
    "causal_zigzag_bf16_one_row_blocks": small_score_blocks(
        lambda r, w: prefill(r, w, seq=14 * w + 1, dtype=torch.bfloat16, layout="BNSD", causal=True, sharding="zigzag")),
    "causal_contiguous_actual_lengths_f16_one_row_blocks": small_score_blocks(
        lambda r, w: prefill(r, w, seq=10 * w, dtype=torch.float16, layout="BSH", causal=True, sharding="contiguous",
                             valid=[10 * w - 7, 3])),
    "noncausal_contiguous_one_padding_key_f16_one_row_blocks": small_score_blocks(
        lambda r, w: prefill(r, w, seq=10 * w, dtype=torch.float16, layout="BSND", causal=False,
                             sharding="contiguous", valid=[10 * w - 1, 9])),
    "bad_zigzag_lengths": bad_zigzag_lengths,
}


def worker(rank, world, port, outdir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    results = {}
    for name, case in CASES.items():
        try:
            results[name] = case(rank, world)
        except Exception as err:  # reported to the test, which fails on it
            results[name] = f"{type(err).__name__}: {err}"
    dist.barrier()
    dist.destroy_process_group()
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_group(world, outdir):
    """Each rank's {case: failure or ''}, from a group of ``world`` spawned gloo processes."""
    context = mp.start_processes(worker, args=(world, free_port(), str(outdir)), nprocs=world, join=False,
                                 start_method="spawn")
    deadline = time.monotonic() + TIMEOUT_S
    while not context.join(timeout=max(deadline - time.monotonic(), 0.1)):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail(f"{world} ranks did not finish within {TIMEOUT_S} s")
    return [json.load(open(outdir / f"rank{r}.json")) for r in range(world)]


@pytest.fixture(scope="module", params=[2, 4], ids=lambda w: f"{w}ranks")
def group_results(request, tmp_path_factory):
    return run_group(request.param, tmp_path_factory.mktemp(f"ranks{request.param}"))


@pytest.mark.parametrize("case", list(CASES))
def test_every_rank_matches_the_single_process_call(group_results, case):
    failures = {rank: results[case] for rank, results in enumerate(group_results) if results[case]}
    assert not failures, failures


def test_zigzag_shards_hold_chunks_r_and_2w_minus_1_minus_r():
    x = torch.arange(10).reshape(1, 1, 10, 1)
    assert shard_sequence(x, 0, 2).flatten().tolist() == [0, 1, 2, 8, 9]
    assert shard_sequence(x, 1, 2).flatten().tolist() == [3, 4, 5, 6, 7]
    assert shard_sequence(x, 1, 2, sharding="contiguous").flatten().tolist() == [5, 6, 7, 8, 9]
    assert shard_lengths(10, 2) == [5, 5] and shard_lengths(11, 4) == [3, 3, 3, 2]


@pytest.mark.parametrize("sharding", ["zigzag", "contiguous"])
@pytest.mark.parametrize("layout", ["BNSD", "BSND", "BSH"])
def test_unshard_inverts_shard(sharding, layout):
    x = torch.randn(2, 13, 3, 4) if layout != "BSH" else torch.randn(2, 13, 12)
    shards = [shard_sequence(x, r, 3, input_layout=layout, sharding=sharding) for r in range(3)]
    assert torch.equal(unshard_sequence(shards, input_layout=layout, sharding=sharding), x)
    with pytest.raises(ValueError, match="^shards:"):
        unshard_sequence(shards[::-1] + [x], input_layout=layout, sharding=sharding)


@pytest.mark.parametrize("kwargs, error, parameter", [
    (dict(input_layout="TND"), ValueError, "input_layout"),
    (dict(sharding="striped"), ValueError, "sharding"),
    (dict(causal=1), TypeError, "causal"),
    (dict(atten_mask=torch.ones(4, 4, dtype=torch.bool)), ValueError, "atten_mask"),
    (dict(softmax_lse_flag=True), ValueError, "softmax_lse_flag"),
    (dict(partial_dtype=torch.int8), ValueError, "partial_dtype"),
    (dict(partial_dtype=torch.bfloat16), ValueError, "partial_dtype"),
    (dict(p_rounding="global"), ValueError, "p_rounding"),
    (dict(), ValueError, "group"),
])
def test_ring_attention_errors_name_the_parameter(kwargs, error, parameter):
    q = torch.randn(1, 2, 4, 16)
    with pytest.raises(error, match=f"^{parameter}:"):
        ring_attention(q, q, q, **{"num_heads": 2, **kwargs})


def test_bad_tensors_and_keywords():
    q = torch.randn(1, 2, 1, 16)
    with pytest.raises(TypeError, match="^key:"):
        sharded_decode(q, q.half(), q, num_heads=2, input_layout="BNSD")
    with pytest.raises(TypeError, match="^query:"):
        sharded_decode(q.numpy(), q, q, num_heads=2, input_layout="BNSD")
    with pytest.raises(ValueError, match="^query:"):
        sharded_decode(torch.randn(1, 2, 3, 16), q, q, num_heads=2, input_layout="BNSD")
    with pytest.raises(ValueError, match="^num_heads:"):
        sharded_decode(q, q, q, input_layout="BNSD")
    with pytest.raises(TypeError, match="unexpected keyword argument 'heads'"):
        sharded_decode(q, q, q, heads=2, input_layout="BNSD")
