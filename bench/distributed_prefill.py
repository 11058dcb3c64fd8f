"""Benchmark (not a test) of fia.distributed.ring_attention: a causal prefill split over the ranks of
torchrun, zig-zag (or contiguous) sharding, Llama-like heads (docs/distributed.md has the results).

    torchrun --nproc-per-node 1 bench/distributed_prefill.py --seq 32768 --threads 2
    torchrun --nproc-per-node 2 bench/distributed_prefill.py --seq 32768 --threads 1

Each rank generates its own shard (no whole-sequence tensors) and reports: the ring_attention time,
with p_rounding "whole_row" (the default, with its row-max pass) and then "per_step" (without), its
peak resident memory (ru_maxrss, reached in the first) and that memory over the process's size
before the inputs were made; the compute rate of one ring step (a fia call on a 2048-query x
4096-key fp16 block without mask and with float32 output, as ring_attention runs it: query-key
pairs x query heads per second); and, with
2 or more ranks, the gloo bandwidth of the ring exchange of one key/value shard (isend to rank
r+1, irecv from rank r-1, as ring_attention does). Rank 0
prints one JSON line.
"""
import argparse
import json
import resource
import time

import torch
import torch.distributed as dist

from fia.distributed import _step, ring_attention, shard_lengths


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def exchange_bandwidth(k: torch.Tensor, v: torch.Tensor, rank: int, world: int, repeats: int) -> float:
    """Bytes per second one rank sends (and receives) in the ring exchange of (k, v)."""
    recv = [torch.empty_like(k), torch.empty_like(v)]
    dist.barrier()
    start = time.perf_counter()
    for _ in range(repeats):
        works = [dist.irecv(t, src=(rank - 1) % world) for t in recv]
        works += [dist.isend(t, dst=(rank + 1) % world) for t in (k, v)]
        for w in works:
            w.wait()
    seconds = time.perf_counter() - start
    return repeats * (k.numel() * k.element_size() + v.numel() * v.element_size()) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=32768)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--sharding", choices=["zigzag", "contiguous"], default="zigzag")
    parser.add_argument("--threads", type=int, default=0, help="fia threads per rank (0: all the process may use)")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(max(args.threads, 1))
    base = rss_mib()
    local = shard_lengths(args.seq, world, args.sharding)[rank]
    g = torch.Generator().manual_seed(rank)
    q = torch.randn(1, args.heads, local, args.dim, generator=g).half()
    k = torch.randn(1, args.kv_heads, local, args.dim, generator=g).half()
    v = torch.randn(1, args.kv_heads, local, args.dim, generator=g).half()
    kw = dict(num_heads=args.heads, num_key_value_heads=args.kv_heads, scale=args.dim ** -0.5, threads=args.threads)

    ring_s = {}
    for p_rounding in ("whole_row", "per_step"):
        dist.barrier()
        start = time.perf_counter()
        ring_attention(q, k, v, causal=True, sharding=args.sharding, input_layout="BNSD", p_rounding=p_rounding, **kw)
        ring_s[p_rounding] = time.perf_counter() - start
        if p_rounding == "whole_row":
            peak = rss_mib()

    qs, ks = (torch.randn(1, n, rows, args.dim, generator=g).half()
              for n, rows in ((args.heads, 2048), (args.kv_heads, 4096)))
    start = time.perf_counter()
    _step(qs, ks, ks, dict(kw, input_layout="BNSD"), True, None)
    pairs_per_s = 2048 * 4096 * args.heads / (time.perf_counter() - start)
    bandwidth = exchange_bandwidth(k, v, rank, world, 3) if world > 1 else None

    report = torch.tensor([ring_s["whole_row"], ring_s["per_step"], peak, peak - base, pairs_per_s, bandwidth or 0.0],
                          dtype=torch.float64)
    every = [torch.empty_like(report) for _ in range(world)]
    dist.all_gather(every, report)
    if rank == 0:
        print(json.dumps({
            "ranks": world, "seq": args.seq, "sharding": args.sharding, "heads": args.heads, "kv_heads": args.kv_heads, "dim": args.dim,
            "threads_per_rank": args.threads, "kv_shard_bytes": k.numel() * 2 * 2,
            "per_rank": [{"ring_s_whole_row": round(r[0].item(), 3), "ring_s_per_step": round(r[1].item(), 3),
                          "peak_rss_mib": round(r[2].item()), "rss_growth_mib": round(r[3].item()),
                          "step_pairs_per_s": r[4].item(), "exchange_bytes_per_s": r[5].item() or None}
                         for r in every]}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
