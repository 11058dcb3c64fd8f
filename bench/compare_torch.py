#!/usr/bin/env python3
"""fia against PyTorch's CPU attention (torch.nn.functional.scaled_dot_product_attention).

For every workload of a shapes file (bench/shapes.json) this script
  1. builds the inputs (seeded), writes them as a case folder (CASE-FORMAT.md) and runs
     `fia run` on it; fia's output is checked (FIA-SPEC 21.1 criterion A) against the same
     attention computed with torch in float64 with FIA's rounding of P (FIA-SPEC 5 step 7) --
     plain SDPA does not round P, which on zero-mean data moves ~1 % of bf16 elements past the
     criterion;
  2. times both on the same inputs and thread count, interleaved: each round runs
     `fia bench --case` (median of --repeat calls, one FIA call = plan + run) and then the same
     number of torch SDPA calls in the inputs' dtype, then in float32 (inputs converted once,
     not timed); decode inputs rotate through copies larger than the last-level cache on both
     sides;
  3. prints, per workload, the median over rounds of torch time / fia time for both (> 1: fia is
     faster).

Both sides read their tensors from transparent huge pages, as engines put KV caches: fia bench's
default (--pages huge), and torch's CPU allocator with THP_MEM_ALLOC_ENABLE=1, which this script
sets unless the environment already does (THP_MEM_ALLOC_ENABLE=0 with --pages small compares
both on 4 KiB pages).

Requires torch (pip install torch) and numpy. Paged KV (D2) is gathered into contiguous tensors
for torch, which has no paged attention; the gather is not timed. Varlen TND (P3) is one SDPA
call per request for torch. Workloads SDPA cannot express (quantized K/V or Q, MLA rope, masks
other than causal) and workloads `fia run` rejects are listed as skipped.

Usage: python3 bench/compare_torch.py [--fia build/fia] [--shapes bench/shapes.json]
                                      [--only D1,P1] [--threads 2] [--rounds 5] [--repeat 10]
                                      [--pages huge|small]
"""
import argparse
import json
import math
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")  # before torch allocates: see the docstring
import torch  # noqa: E402
import torch.nn.functional as F

DTYPES = {"F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32, "I32": torch.int32,
          "I8": torch.int8, "BOOL": torch.bool}


def llc_bytes():
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index3/size") as f:
            return int(f.read().strip().rstrip("K")) * 1024
    except OSError:
        return 32 << 20


def make_inputs(entry, seed):
    """The workload's tensors as torch tensors (same rules as fia bench: shuffled block ids,
    compressed causal mask)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, (dt, shape) in entry["tensors"].items():
        dtype = DTYPES[dt]
        if name == "block_table":
            n = math.prod(shape)
            out[name] = torch.randperm(n, generator=g).to(torch.int32).reshape(shape)
        elif name == "atten_mask":
            rows, cols = shape[-2], shape[-1]
            tri = torch.triu(torch.ones(rows, cols, dtype=torch.bool), diagonal=1)
            out[name] = tri.reshape(shape).to(dtype)
        elif dtype == torch.int8:
            out[name] = torch.randint(-127, 128, shape, generator=g, dtype=torch.int8)
        else:
            out[name] = (torch.rand(shape, generator=g) * 2 - 1).to(dtype)
    return out


def torch_cannot(entry):
    """Why plain SDPA cannot run this workload as the same attention ("" when it can): quantized
    tensors (int8 / packed int4 K/V, full quantization), MLA rope parts, masks other than causal."""
    tensors, params = entry["tensors"], entry["params"]
    if any(dt in ("I8", "I32") for name, (dt, _) in tensors.items() if name != "block_table"):
        return "quantized tensors, no SDPA equivalent"
    if "query_rope" in tensors or "key_rope" in tensors:
        return "MLA rope, no SDPA equivalent"
    if params.get("sparse_mode", 0) not in (0, 3):
        return f"sparse_mode {params['sparse_mode']}, no SDPA equivalent"
    return ""


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    names = {torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32", torch.int32: "I32",
             torch.int8: "I8", torch.bool: "BOOL"}
    for name, t in tensors.items():
        t = t.contiguous()
        raw = t.view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, en = e["data_offsets"]
        raw = data[8 + n + b:8 + n + en]
        if e["dtype"] == "BF16":
            t = torch.frombuffer(bytearray(raw), dtype=torch.int16).view(torch.bfloat16)
        else:
            t = torch.from_numpy(np.frombuffer(raw, dtype={"F16": np.float16, "F32": np.float32}[e["dtype"]]).copy())
        out[name] = t.reshape(e["shape"])
    return out


class TorchCall:
    """The same attention as torch SDPA calls on (B, N, S, D) tensors."""

    def __init__(self, entry, t):
        p = entry["params"]
        self.n = p.get("num_heads", 1)
        self.kvn = p.get("num_key_value_heads", 0) or self.n
        self.scale = p.get("scale", 1.0)
        self.causal = p.get("sparse_mode", 0) == 3
        layout = p.get("input_layout", "BSH")
        q, k, v = t["query"], t["key"], t["value"]
        if "block_table" in t:  # paged: gather each sequence's blocks (not timed)
            table, bs, lens = t["block_table"], p["block_size"], p["actual_seq_lengths_kv"]
            kvd = k.shape[-1] // self.kvn
            ks, vs = [], []
            for b in range(table.shape[0]):
                blocks = table[b, : math.ceil(lens[b] / bs)].long()
                kb = k[blocks].reshape(-1, self.kvn, kvd)[: lens[b]]
                vb = v[blocks].reshape(-1, self.kvn, kvd)[: lens[b]]
                ks.append(kb.permute(1, 0, 2))
                vs.append(vb.permute(1, 0, 2))
            k, v = torch.stack(ks), torch.stack(vs)
            layout_kv = "BNSD"
        else:
            layout_kv = layout
        self.groups = []  # list of (q, k, v) in (B, N, S, D)
        if layout == "TND":
            qs, kvs = p["actual_seq_lengths"], p["actual_seq_lengths_kv"]
            prev_q = prev_kv = 0
            for eq, ekv in zip(qs, kvs):
                self.groups.append((q[prev_q:eq].permute(1, 0, 2)[None].contiguous(),
                                    k[prev_kv:ekv].permute(1, 0, 2)[None].contiguous(),
                                    v[prev_kv:ekv].permute(1, 0, 2)[None].contiguous()))
                prev_q, prev_kv = eq, ekv
        else:
            self.groups.append((self.bnsd(q, layout, self.n), self.bnsd(k, layout_kv, self.kvn),
                                self.bnsd(v, layout_kv, self.kvn)))

    @staticmethod
    def bnsd(x, layout, heads):
        if layout == "BNSD":
            return x.contiguous()
        if layout == "BSH":
            b, s, h = x.shape
            return x.reshape(b, s, heads, h // heads).transpose(1, 2).contiguous()
        return x.transpose(1, 2).contiguous()  # BSND

    def __call__(self, groups=None, dtype=None):
        outs = []
        for q, k, v in groups or self.groups:
            if dtype is not None:
                q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
            outs.append(F.scaled_dot_product_attention(q, k, v, scale=self.scale, is_causal=self.causal,
                                                       enable_gqa=self.n != self.kvn))
        return outs


def p_rounding(entry, dtype):
    """The dtype FIA rounds the softmax numerators to before P·V (FIA-SPEC 5 step 7, 25.3): the
    query's, except on the TND/NTD layouts ("split fuse"), where inner_precise 0 keeps P in f32
    (None). Split fuse with inner_precise 1 rounds per 512-key tile against the running max, which
    fia_semantics does not model: "unmodelled"."""
    p = entry["params"]
    if p.get("input_layout", "BSH").split("_")[0] in ("TND", "NTD"):
        return "unmodelled" if p.get("inner_precise", 0) & 1 else None
    return dtype


def fia_semantics(q, k, v, scale, causal, round_dtype):
    """FIA-SPEC 5 in torch float64, one head at a time: scale, causal mask, softmax whose
    unnormalised exponentials are rounded to `round_dtype` before P·V (step 7; None: not
    rounded)."""
    g = q.shape[1] // k.shape[1]
    out = torch.empty(q.shape, dtype=torch.float64)
    for n in range(q.shape[1]):
        qn, kn, vn = q[:, n].double(), k[:, n // g].double(), v[:, n // g].double()
        s = qn @ kn.transpose(-1, -2) * float(np.float32(scale))
        if causal:
            sq, skv = s.shape[-2], s.shape[-1]
            i = torch.arange(sq)[:, None]
            j = torch.arange(skv)[None, :]
            s = s.masked_fill(j > i + (skv - sq), float("-inf"))
        m = s.amax(-1, keepdim=True)
        e = torch.exp(s - m)
        p = e.to(round_dtype).double() if round_dtype is not None else e
        out[:, n] = (p @ vn) / e.sum(-1, keepdim=True)
    return out


def criterion_a(got, want, bf16):
    rtol, atol = (2 ** -7, 1e-4) if bf16 else (0.005, 2.5e-5)
    got, want = got.double().flatten(), want.double().flatten()
    close = (got - want).abs() <= atol + rtol * want.abs()
    rel = (got - want).abs() / torch.maximum(torch.maximum(got.abs(), want.abs()), torch.tensor(2 ** -14 / 0.005))
    worst = rel[~close].max().item() if (~close).any() else 0.0
    return close.double().mean().item() >= 0.995 and worst < 10, close.double().mean().item()


def fia_output_as_bnsd(entry, out):
    p = entry["params"]
    layout = p.get("input_layout", "BSH")
    n = p.get("num_heads", 1)
    if layout == "TND":
        return out  # compared per request below
    return TorchCall.bnsd(out, layout, n)


def parse_args(description, pages="huge"):
    """The command line both comparison scripts take; `pages` is the default of --pages (the
    pages of fia's tensors: those the peer's tensors lie on)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--fia", default="build/fia")
    ap.add_argument("--shapes", default="bench/shapes.json")
    ap.add_argument("--only", default="")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--pages", choices=["huge", "small"], default=pages,
                    help=f"pages of fia's tensors, as fia bench --pages (default {pages}: the peer's)")
    return ap.parse_args()


def workloads(args):
    """The shapes file's workloads, those of --only."""
    with open(args.shapes) as f:
        shapes = json.load(f)["shapes"]
    only = [s for s in args.only.split(",") if s]
    return [e for e in shapes if not only or e["name"] in only]


def run_fia_case(entry, tmp, args):
    """Writes the workload's seeded inputs as a case folder and runs `fia run` on it. Returns
    (inputs, case folder, fia's attention_out), or (inputs, case, error line) when fia rejects it."""
    t = make_inputs(entry, seed=7)
    case = os.path.join(tmp, entry["name"])
    os.makedirs(case, exist_ok=True)
    with open(os.path.join(case, "params.json"), "w") as f:
        json.dump(entry["params"], f)
    write_safetensors(os.path.join(case, "inputs.safetensors"), t)
    res = subprocess.run([args.fia, "run", case, "--out", case + "/out", "--threads", str(args.threads)],
                         capture_output=True, text=True)
    if res.returncode != 0:  # rejected by fia (e.g. not supported yet): listed, not compared
        return t, case, (res.stderr.strip().splitlines() or ["fia run failed"])[-1]
    return t, case, read_safetensors(case + "/out/outputs.safetensors")["attention_out"]


def check_fia(entry, t, got, call):
    """fia's output against FIA semantics in float64: (criterion A passed, or None when the
    semantics are not modelled here; the exact outputs per group of `call`; bf16)."""
    bf16 = t["query"].dtype == torch.bfloat16
    rounding = p_rounding(entry, t["query"].dtype)
    want = [fia_semantics(q, k, v, call.scale, call.causal, None if rounding == "unmodelled" else rounding)
            for q, k, v in call.groups]
    if rounding == "unmodelled":
        return None, want, bf16
    if entry["params"].get("input_layout") == "TND":
        pieces, start = [], 0
        for (q, _, _), w in zip(call.groups, want):
            pieces.append((got[start:start + q.shape[2]].float().permute(1, 0, 2)[None], w))
            start += q.shape[2]
        return all(criterion_a(g, w, bf16)[0] for g, w in pieces), want, bf16
    return criterion_a(fia_output_as_bnsd(entry, got).float(), want[0], bf16)[0], want, bf16


def fia_bench_median(case, args):
    """Seconds of fia's median call on the case folder (`fia bench --case`), its tensors on
    --pages."""
    res = subprocess.run([args.fia, "bench", "--case", case, "--threads", str(args.threads), "--repeat",
                          str(args.repeat), "--pages", args.pages, "--json", case + "/bench.json"],
                         capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"fia bench failed on {case}: {res.stderr}")
    with open(case + "/bench.json") as f:
        return json.load(f)["results"][0]["median_s"]


def main():
    args = parse_args(__doc__.split("\n")[0])
    torch.set_num_threads(args.threads)
    print(f"fia vs torch {torch.__version__} SDPA, {args.threads} threads, {args.rounds} interleaved rounds")
    print(f"{'shape':6} {'fia ms':>9} {'torch ms':>9} {'torch/fia':>10} {'fp32 ms':>10} {'fp32/fia':>10}  {'check':>6}  what")
    tmp = tempfile.mkdtemp(prefix="fia-vs-torch-")
    for entry in workloads(args):
        name = entry["name"]
        why = torch_cannot(entry)
        if not why:
            t, case, got = run_fia_case(entry, tmp, args)
            why = got if isinstance(got, str) else ""
        if why:
            print(f"{name:6} {'-':>9} {'-':>9} {'-':>10} {'-':>10} {'-':>10}  {'-':>6}  {entry['what']} (skipped: {why})")
            continue
        call = TorchCall(entry, t)
        ok, _, _ = check_fia(entry, t, got, call)

        # Torch decode inputs rotate through copies beyond the last-level cache, as fia bench does.
        kv_bytes = sum(x.numel() * x.element_size() for g in call.groups for x in g[1:])
        decode = all(g[0].shape[2] <= 16 for g in call.groups)
        copies = [call.groups]
        if decode:
            for _ in range(max(1, math.ceil(4 * llc_bytes() / kv_bytes)) - 1):
                copies.append([(q, torch.rand_like(k), torch.rand_like(v)) for q, k, v in call.groups])
        copies32 = [[(q.float(), k.float(), v.float()) for q, k, v in c] for c in copies]
        ratios, ratios32, fia_ms, torch_ms, torch32_ms = [], [], [], [], []
        for _ in range(args.rounds):
            f_med = fia_bench_median(case, args)
            meds = []
            for inputs in (copies, copies32):  # the inputs' dtype, then float32
                times = []
                for i in range(args.repeat + len(inputs)):
                    t0 = time.perf_counter()
                    call(inputs[i % len(inputs)])
                    if i >= len(inputs):  # the first pass over the copies is warm-up
                        times.append(time.perf_counter() - t0)
                meds.append(statistics.median(times))
            fia_ms.append(f_med * 1e3)
            torch_ms.append(meds[0] * 1e3)
            torch32_ms.append(meds[1] * 1e3)
            ratios.append(meds[0] / f_med)
            ratios32.append(meds[1] / f_med)
        print(f"{name:6} {statistics.median(fia_ms):9.3f} {statistics.median(torch_ms):9.3f} "
              f"{statistics.median(ratios):10.2f} {statistics.median(torch32_ms):10.3f} {statistics.median(ratios32):10.2f}"
              f"  {'-' if ok is None else 'ok' if ok else 'FAIL':>6}  {entry['what']}", flush=True)


if __name__ == "__main__":
    main()
