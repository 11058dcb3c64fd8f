#!/usr/bin/env python3
"""fia against ggml's CPU flash attention (ggml_flash_attn_ext, the attention of llama.cpp).

ggml comes from PyPI: `pip install ggml-python` builds the ggml it bundles (for this CPU, with
its own CMake flags) and binds it with ctypes; nothing of ggml is vendored here. For every
workload of a shapes file this script, like bench/compare_torch.py (whose input and checking
helpers it shares),
  1. builds the inputs (seeded), runs `fia run` on them and checks fia's output against FIA
     semantics in float64 (FIA-SPEC 21.1 criterion A);
  2. builds one ggml graph per request (ggml attends over one sequence per call, as llama.cpp
     does per micro-batch): Q in F32, K and V in F16 (ggml's CPU kernel has no BF16 K/V here:
     bf16 workloads give ggml their values rounded to fp16), a causal mask as ggml's F16 mask
     padded to GGML_KQ_MASK_PAD rows; GQA by ggml's head broadcast;
  3. times both interleaved, round by round (`fia bench --case`, then the same number of
     ggml_graph_compute calls on the same thread count, each graph planned once); decode rotates
     through copies of K/V beyond the last-level cache on both sides;
  4. prints, per workload, the median over rounds of ggml time / fia time (> 1: fia is faster) and
     the fraction of ggml's output within criterion A of FIA semantics (ggml accumulates P·V in
     fp16 and does not round P as FIA does, so it is informative, not a pass/fail).

ggml's tensors lie in buffers of its own on ordinary (4 KiB) pages, so fia's do too by default
(--pages small; fia bench's own default is huge pages).

Paged KV (D2) is gathered into contiguous per-request tensors for ggml (not timed); varlen TND
(P3) is one graph per request. Workloads ggml cannot express (quantized K/V or Q, MLA rope, masks
other than causal) and those `fia run` rejects are listed as skipped.

Usage: pip install ggml-python
       python3 bench/compare_ggml.py [--fia build/fia] [--shapes bench/shapes.json]
                                     [--only D1,P1] [--threads 2] [--rounds 5] [--repeat 10]
"""
import ctypes
import math
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_torch as ct  # noqa: E402  (the shared input, layout and criterion helpers)

try:
    import ggml
except ImportError:
    sys.exit("compare_ggml.py needs ggml: pip install ggml-python")


def np_f16(x):
    return np.ascontiguousarray(x.to(torch.float16).numpy())


def np_f32(x):
    return np.ascontiguousarray(x.float().numpy())


class GgmlCall:
    """ggml_flash_attn_ext over every request of a workload: one graph per (request, K/V copy).

    `groups` are (q, k, v) in (B, N, S, D), as TorchCall builds them; each batch is a request."""

    def __init__(self, groups, scale, causal, threads, copies):
        self.threads = threads
        self.batches = [q.shape[0] for q, _, _ in groups]
        groups = [(q[b:b + 1], k[b:b + 1], v[b:b + 1]) for q, k, v in groups for b in range(q.shape[0])]
        self.graphs = []  # per copy: [(graph, out tensor, (N, Sq, D), compute plan, its work buffer)]
        need = 0
        for q, k, v in groups:
            sq = q.shape[2]
            pad = -(-sq // ggml.GGML_KQ_MASK_PAD) * ggml.GGML_KQ_MASK_PAD
            need += q.numel() * 4 + 2 * (k.numel() + v.numel()) * 2 + pad * k.shape[2] * 2 + q.numel() * 4
        mem = copies * need + 64 * 1024 * 1024 + copies * len(groups) * 1024 * 1024
        self.ctx = ggml.ggml_init(ggml.ggml_init_params(mem_size=mem, mem_buffer=None, no_alloc=False))
        if not self.ctx:
            sys.exit("ggml_init failed")
        for c in range(copies):
            graphs = []
            for q, k, v in groups:
                if c > 0:  # other K/V values of the same shape, as fia bench's cold copies
                    k, v = torch.rand_like(k.float()) * 2 - 1, torch.rand_like(v.float()) * 2 - 1
                graphs.append(self.build(q, k, v, scale, causal))
            self.graphs.append(graphs)

    def tensor(self, gtype, array):
        shape = array.shape[::-1]  # ggml ne0 is the innermost axis
        t = ggml.ggml_new_tensor_4d(self.ctx, gtype, *(list(shape) + [1] * (4 - len(shape))))
        ctypes.memmove(ggml.ggml_get_data(t), array.ctypes.data, array.nbytes)
        return t

    def build(self, q, k, v, scale, causal):
        n, sq, d = q.shape[1], q.shape[2], q.shape[3]
        skv = k.shape[2]
        gq = self.tensor(ggml.GGML_TYPE_F32, np_f32(q[0]))  # (N, Sq, D)
        gk = self.tensor(ggml.GGML_TYPE_F16, np_f16(k[0]))  # (N_kv, Skv, D)
        gv = self.tensor(ggml.GGML_TYPE_F16, np_f16(v[0]))
        mask = None
        if causal:  # bottom-right aligned, as sparse_mode 3; rows past sq are padding
            pad = -(-sq // ggml.GGML_KQ_MASK_PAD) * ggml.GGML_KQ_MASK_PAD
            i = np.arange(pad)[:, None]
            j = np.arange(skv)[None, :]
            m = np.where(j > i + (skv - sq), -np.inf, 0.0).astype(np.float16)
            mask = self.tensor(ggml.GGML_TYPE_F16, np.ascontiguousarray(m))
        out = ggml.ggml_flash_attn_ext(self.ctx, gq, gk, gv, mask, scale, 0.0, 0.0)
        graph = ggml.ggml_new_graph(self.ctx)
        ggml.ggml_build_forward_expand(graph, out)
        # Planned once, with a work buffer of its own: ggml_graph_compute_with_ctx takes a new work
        # buffer from the context on every call, which ran out of it within a D2 run.
        plan = ggml.ggml_graph_plan(graph, self.threads, None)
        work = (ctypes.c_uint8 * max(1, plan.work_size))()
        plan.work_data = ctypes.cast(work, ctypes.POINTER(ctypes.c_uint8))
        return graph, out, (n, sq, d), plan, work

    def __call__(self, copy=0):
        for graph, _, _, plan, _ in self.graphs[copy]:
            if ggml.ggml_graph_compute(graph, ctypes.byref(plan)) != 0:
                sys.exit("ggml_graph_compute failed")

    def outputs(self):
        """The results of copy 0 per group as (B, N, Sq, D) float64 tensors (ggml writes (Sq, N, D))."""
        rows = []
        for _, out, (n, sq, d), _, _ in self.graphs[0]:
            buf = (ctypes.c_float * (n * sq * d)).from_address(ggml.ggml_get_data(out))
            a = np.frombuffer(buf, dtype=np.float32).reshape(sq, n, d)
            rows.append(torch.from_numpy(a.transpose(1, 0, 2).copy()).double()[None])
        res, start = [], 0
        for b in self.batches:
            res.append(torch.cat(rows[start:start + b]))
            start += b
        return res

    def free(self):
        ggml.ggml_free(self.ctx)


def main():
    args = ct.parse_args(__doc__.split("\n")[0], pages="small")
    print(f"fia vs ggml (ggml-python {getattr(ggml, '__version__', '?')}) flash attention, {args.threads} threads, "
          f"{args.rounds} interleaved rounds")
    print(f"{'shape':6} {'fia ms':>9} {'ggml ms':>9} {'ggml/fia':>9}  {'fia':>4} {'ggml in A':>9}  what")
    tmp = tempfile.mkdtemp(prefix="fia-vs-ggml-")
    for entry in ct.workloads(args):
        name = entry["name"]
        why = ct.torch_cannot(entry).replace("SDPA", "ggml")
        if not why:
            t, case, got = ct.run_fia_case(entry, tmp, args)
            why = got if isinstance(got, str) else ""
        if why:
            print(f"{name:6} {'-':>9} {'-':>9} {'-':>9}  {'-':>4} {'-':>9}  {entry['what']} (skipped: {why})")
            continue
        call = ct.TorchCall(entry, t)  # the requests as (B, N, S, D) groups
        fia_ok, want, bf16 = ct.check_fia(entry, t, got, call)

        kv_bytes = sum(x.numel() * 2 for g in call.groups for x in g[1:])  # F16 K/V in ggml
        decode = all(g[0].shape[2] <= 16 for g in call.groups)
        copies = max(1, math.ceil(4 * ct.llc_bytes() / kv_bytes)) if decode else 1
        gcall = GgmlCall(call.groups, call.scale, call.causal, args.threads, copies)
        gcall()
        ggml_in_a = min(ct.criterion_a(o, w, bf16)[1] for o, w in zip(gcall.outputs(), want))
        ratios, fia_ms, ggml_ms = [], [], []
        for _ in range(args.rounds):
            f_med = ct.fia_bench_median(case, args)
            times = []
            for i in range(args.repeat + copies):
                t0 = time.perf_counter()
                gcall(i % copies)
                if i >= copies:  # the first pass over the copies is warm-up
                    times.append(time.perf_counter() - t0)
            g_med = statistics.median(times)
            fia_ms.append(f_med * 1e3)
            ggml_ms.append(g_med * 1e3)
            ratios.append(g_med / f_med)
        gcall.free()
        print(f"{name:6} {statistics.median(fia_ms):9.3f} {statistics.median(ggml_ms):9.3f} "
              f"{statistics.median(ratios):9.2f}  {'-' if fia_ok is None else 'ok' if fia_ok else 'FAIL':>4} {ggml_in_a:9.1%}  {entry['what']}",
              flush=True)


if __name__ == "__main__":
    main()
