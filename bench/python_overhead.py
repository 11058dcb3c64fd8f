"""Per-call overhead of fia's Python API over its C++ API, on the D1 workload (bench/shapes.json).

    PYTHONPATH=build/python python3 bench/python_overhead.py [--rounds 7] [--calls 200] [--threads 0]

On a shared machine, run it under real-time priority (chrt -f 20 ...) for stable numbers.

Both sides make the same complete call (validate, plan, allocate the outputs, compute): the C++
side loops fia::fused_infer_attention_score in C++ (fia._C.Call.time_cpp_calls); the Python side
calls fia.npu_fused_infer_attention_score with torch tensors (eager: the core directly, as the
torch.ops.fia kernel does) and with numpy arrays. The three alternate call by call; each round
takes the median single call of each kind, and the overhead is the difference of the medians over
the rounds, in microseconds and as a fraction of the C++ call. A benchmark, not a test."""
import argparse
import json
import pathlib
import statistics
import time

import numpy as np
import torch

import fia
from fia import _calls

SHAPES = pathlib.Path(__file__).resolve().parent / "shapes.json"


def d1_inputs():
    shape = next(s for s in json.loads(SHAPES.read_text())["shapes"] if s["name"] == "D1")
    g = torch.Generator().manual_seed(1)
    tensors = {name: torch.randn(dims, generator=g).to(torch.float16) for name, (dtype, dims) in shape["tensors"].items()}
    return tensors, shape["params"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    t, params = d1_inputs()
    kwargs = dict(params, threads=args.threads)
    q, k, v = t["query"], t["key"], t["value"]
    qn, kn, vn = q.numpy(), k.numpy(), v.numpy()
    call = _calls.plan("npu_fused_infer_attention_score", q, k, v, {**params}, threads=args.threads)

    def python_torch():
        fia.npu_fused_infer_attention_score(q, k, v, **kwargs)

    def python_numpy():
        fia.npu_fused_infer_attention_score(qn, kn, vn, **kwargs)

    calls = {"torch": python_torch, "numpy": python_numpy}
    for _ in range(3):  # warm-up
        python_torch(), python_numpy(), call.time_cpp_calls(3)
    # Call by call, C++ and Python alternate, in a rotating order, so that the machine's drift
    # (other processes, clock changes) and the cost of following another kind of call fall on every
    # side alike. Every call is timed on its own and each round reports medians: a shared machine
    # stalls single calls for milliseconds (other tenants; under `chrt -f`, the kernel's real-time
    # throttling pauses the process for 50 ms every second), which a mean would charge to whichever
    # side it hit.
    results = {"cpp": [], "torch": [], "numpy": []}
    order = ["cpp", *calls]
    for _ in range(args.rounds):
        spent = {name: [] for name in results}
        for i in range(args.calls):
            for name in order[i % 3:] + order[:i % 3]:
                if name == "cpp":
                    spent[name].append(call.time_cpp_calls(1))
                    continue
                start = time.perf_counter()
                calls[name]()
                spent[name].append(time.perf_counter() - start)
        for name in results:
            results[name].append(statistics.median(spent[name]))
    cpp = statistics.median(results["cpp"])
    print(f"D1, {args.rounds} rounds of {args.calls} calls of each kind, rotating; median of the rounds' "
          f"median call (threads={args.threads or 'all'})")
    print(f"  C++ fia::fused_infer_attention_score: {cpp * 1e6:9.1f} us/call")
    for name in calls:
        med = statistics.median(results[name])
        per_round = [(p - c) * 1e6 for p, c in zip(results[name], results["cpp"])]
        print(f"  Python ({name:5s}):                    {med * 1e6:9.1f} us/call  overhead "
              f"{(med - cpp) * 1e6:7.1f} us = {(med - cpp) / cpp:+.1%} of the C++ call "
              f"(rounds {min(per_round):+.1f} .. {max(per_round):+.1f} us)")

if __name__ == "__main__":
    main()
