"""Ring attention (context parallelism) for a causal prefill with fia on torch.distributed.

    torchrun --nproc-per-node 2 examples/distributed/ring_prefill.py
    torchrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \
             --rdzv-id ring1 examples/distributed/ring_prefill.py     # on each machine

Every rank builds the same whole sequence (a fixed seed), keeps its zig-zag shard, runs
fia.distributed.ring_attention over the ring of ranks, and checks its shard of the result against
the single-process fia call on the whole sequence: rank 0 prints the share of output elements equal
to it bit for bit and within criterion A (FIA-SPEC 21.1), and the largest LSE error, over all ranks
(docs/distributed.md). Exits 1 if a rank misses criterion A or an LSE is off by more than 1e-4.
"""
import argparse
import time

import torch
import torch.distributed as dist

import fia
from fia.distributed import ring_attention, shard_sequence

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
CRITERION_A = {torch.float16: (2.5e-5, 0.005), torch.bfloat16: (1e-4, 2.0 ** -7), torch.float32: (1e-6, 1e-5)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=1000, help="tokens in the whole sequence")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--dtype", choices=DTYPES, default="float16")
    parser.add_argument("--sharding", choices=["zigzag", "contiguous"], default="zigzag")
    parser.add_argument("--p-rounding", choices=["whole_row", "per_step"], default="whole_row",
                        help="16-bit P rounded against the whole row's max (as the single call) or each step's")
    parser.add_argument("--backend", default="gloo", help="torch.distributed backend (gloo on CPUs)")
    args = parser.parse_args()

    dist.init_process_group(args.backend)            # torchrun's environment: rank, world size, rendezvous
    rank, world = dist.get_rank(), dist.get_world_size()
    dtype = DTYPES[args.dtype]
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, args.heads, args.seq, args.dim, generator=g).to(dtype)          # BNSD
    k = torch.randn(1, args.kv_heads, args.seq, args.dim, generator=g).to(dtype)
    v = torch.randn(1, args.kv_heads, args.seq, args.dim, generator=g).to(dtype)
    kw = dict(num_heads=args.heads, num_key_value_heads=args.kv_heads, scale=args.dim ** -0.5)

    def shard(x):
        return shard_sequence(x, rank, world, input_layout="BNSD", sharding=args.sharding)

    start = time.perf_counter()
    out, lse = ring_attention(shard(q), shard(k), shard(v), causal=True, sharding=args.sharding,
                              input_layout="BNSD", p_rounding=args.p_rounding, **kw)
    elapsed = time.perf_counter() - start

    mask = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), 1)
    whole, whole_lse = fia.npu_fused_infer_attention_score(q, k, v, input_layout="BNSD", sparse_mode=3,
                                                          atten_mask=mask, softmax_lse_flag=True, **kw)
    expected = shard(whole).double()
    atol, rtol = CRITERION_A[dtype]
    diff = (out.double() - expected).abs()
    counts = torch.tensor([float((out == shard(whole)).sum()), float((diff <= atol + rtol * expected.abs()).sum()),
                           float(out.numel())], dtype=torch.float64)
    worst = torch.tensor([(lse.double() - shard(whole_lse).double()).abs().max().item(), elapsed], dtype=torch.float64)
    dist.all_reduce(counts)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    equal, within = (counts[i].item() / counts[2].item() for i in (0, 1))
    ok = within >= 0.995 and worst[0].item() <= 1e-4
    if rank == 0:
        print(f"{world} ranks, {args.seq} tokens, {args.sharding}, {args.dtype}, {args.p_rounding}: ring attention "
              f"{worst[1]:.3f} s (slowest rank); vs the single-process call: {equal:.2%} of the output equal bit for "
              f"bit, {within:.2%} within criterion A, max |lse error| {worst[0]:.3g} -> {'OK' if ok else 'FAILED'}")
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
