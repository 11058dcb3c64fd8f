"""fia inside torch: torch.compile(fullgraph=True), torch.export, fake (meta) shapes, the
torch_npu stand-in module, and calls from several Python threads."""
import sys
import threading

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import fia

OP = torch.ops.fia.npu_fused_infer_attention_score


def rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


class Attention(torch.nn.Module):
    """A small attention block: projections, fia attention (BSH, GQA, causal), output projection."""

    def __init__(self, hidden=128, heads=4, kv_heads=2):
        super().__init__()
        torch.manual_seed(0)
        self.heads, self.kv_heads, self.d = heads, kv_heads, hidden // heads
        self.q = torch.nn.Linear(hidden, hidden, bias=False)
        self.kv = torch.nn.Linear(hidden, 2 * kv_heads * self.d, bias=False)
        self.o = torch.nn.Linear(hidden, hidden, bias=False)
        self.register_buffer("mask", torch.triu(torch.ones(2048, 2048, dtype=torch.bool), 1))

    def forward(self, x):
        q = self.q(x)
        k, v = self.kv(x).chunk(2, dim=-1)
        out, lse = fia.npu_fused_infer_attention_score(
            q, k.contiguous(), v.contiguous(), num_heads=self.heads, num_key_value_heads=self.kv_heads,
            input_layout="BSH", scale=self.d ** -0.5, sparse_mode=3, atten_mask=self.mask, softmax_lse_flag=True)
        return self.o(out), lse


@pytest.fixture(scope="module")
def module_and_input():
    return Attention().eval(), rand(2, 16, 128, seed=1)


def test_compile_fullgraph_bit_identical(module_and_input):
    m, x = module_and_input
    torch._dynamo.reset()
    with torch.no_grad():
        eager = m(x)
        compiled = torch.compile(m, fullgraph=True, backend="aot_eager")(x)
    assert torch.equal(eager[0], compiled[0])
    assert torch.equal(eager[1], compiled[1])
    assert eager[1].shape == (2, 4, 16, 1)


def test_compile_fullgraph_inductor(module_and_input):
    m, x = module_and_input
    torch._dynamo.reset()

    def attn(q, k, v):
        return fia.npu_fused_infer_attention_score(q, k, v, num_heads=4, input_layout="BNSD", scale=0.125,
                                                   softmax_lse_flag=True)

    q, k, v = rand(1, 4, 8, 32, seed=2), rand(1, 4, 12, 32, seed=3), rand(1, 4, 12, 32, seed=4)
    try:
        got = torch.compile(attn, fullgraph=True)(q, k, v)
    except Exception as e:  # inductor needs a working C++ toolchain
        if "compiler" in str(e).lower() or "InductorError" in type(e).__name__:
            pytest.skip(f"inductor unavailable: {type(e).__name__}")
        raise
    want = attn(q, k, v)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_export_contains_op_and_runs(module_and_input):
    m, x = module_and_input
    exported = torch.export.export(m, (x,))
    targets = [n.target for n in exported.graph.nodes if n.op == "call_function"]
    assert torch.ops.fia.npu_fused_infer_attention_score.default in targets
    with torch.no_grad():
        want = m(x)
        got = exported.module()(x)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_compile_incre_and_prompt():
    torch._dynamo.reset()

    def decode(q, k, v):
        return fia.npu_incre_flash_attention(q, k, v, num_heads=4, num_key_value_heads=1, input_layout="BSH",
                                             scale_value=0.125, actual_seq_lengths=[20, 7])

    def prefill(q, k, v):
        return fia.npu_prompt_flash_attention(q, k, v, num_heads=4, input_layout="BSND", scale_value=0.125,
                                              next_tokens=65535, actual_seq_lengths=[6, 3])

    args = rand(2, 1, 128, seed=5), rand(2, 20, 32, seed=6), rand(2, 20, 32, seed=7)
    want = decode(*args)
    got = torch.compile(decode, fullgraph=True, backend="aot_eager")(*args)
    assert got.shape == (2, 1, 128) and torch.equal(got, want)
    args = tuple(rand(2, s, 4, 16, dtype=torch.float16, seed=8 + i) for i, s in enumerate((6, 9, 9)))
    want = prefill(*args)
    got = torch.compile(prefill, fullgraph=True, backend="aot_eager")(*args)
    assert got.shape == (2, 6, 4, 16) and got.dtype == torch.float16 and torch.equal(got, want)


# (layout, query shape, key shape, extra kwargs); N = 4, KV_N = 2, D = 32, V_D = 16
FAKE_CASES = [
    ("BSH", (2, 5, 128), (2, 7, 64), (2, 7, 32), {}),
    ("BSND", (2, 5, 4, 32), (2, 7, 2, 32), (2, 7, 2, 16), {}),
    ("BNSD", (2, 4, 5, 32), (2, 2, 7, 32), (2, 2, 7, 16), {}),
    ("BNSD_BSND", (2, 4, 5, 32), (2, 2, 7, 32), (2, 2, 7, 16), {}),
    ("BSH_NBSD", (2, 5, 128), (2, 7, 64), (2, 7, 32), {}),
    ("BSND_BNSD", (2, 5, 4, 32), (2, 7, 2, 32), (2, 7, 2, 16), {}),
    ("BNSD_NBSD", (2, 4, 5, 32), (2, 2, 7, 32), (2, 2, 7, 16), {}),
    ("TND", (9, 4, 32), (12, 2, 32), (12, 2, 16), dict(actual_seq_lengths=[4, 9], actual_seq_lengths_kv=[5, 12])),
    ("NTD_TND", (4, 9, 32), (2, 12, 32), (2, 12, 16),
     dict(actual_seq_lengths=[4, 9], actual_seq_lengths_kv=[5, 12])),
    ("BSH", (0, 5, 128), (0, 7, 64), (0, 7, 64), {}),  # empty query
]


@pytest.mark.parametrize("lse", [False, True])
@pytest.mark.parametrize("case", FAKE_CASES, ids=[f"{c[0]}-{c[1][0]}" for c in FAKE_CASES])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fake_shapes_match_real(case, lse, dtype):
    layout, qs, ks, vs, extra = case
    q, k, v = rand(*qs, dtype=dtype, seed=11), rand(*ks, dtype=dtype, seed=12), rand(*vs, dtype=dtype, seed=13)
    kw = dict(num_heads=4, num_key_value_heads=2, input_layout=layout, scale=0.2, softmax_lse_flag=lse, **extra)
    if layout.startswith("TND") or layout.startswith("NTD"):
        kw["inner_precise"] = 0
    real = OP(q, [k], [v], **kw)
    with FakeTensorMode() as mode:
        fq, fk, fv = (mode.from_tensor(t) for t in (q, k, v))
        fake = OP(fq, [fk], [fv], **kw)
    for r, f in zip(real, fake):
        assert tuple(f.shape) == tuple(r.shape), (layout, tuple(f.shape), tuple(r.shape))
        assert f.dtype == r.dtype
    if lse:
        assert real[1].dtype == torch.float32 and real[1].dim() in (3, 4)
    else:
        assert real[1].shape == (1,) and real[1].item() == 0.0


def test_fake_shapes_v2_ifa_pfa():
    q, k, v = rand(2, 1, 128, seed=14), rand(2, 9, 64, seed=15), rand(2, 9, 64, seed=16)
    calls = [
        lambda q, k, v: torch.ops.fia.npu_incre_flash_attention(q, [k], [v], num_heads=4, num_key_value_heads=2),
        lambda q, k, v: torch.ops.fia.npu_prompt_flash_attention(q, [k], [v], num_heads=4, num_key_value_heads=2),
        lambda q, k, v: torch.ops.fia.npu_fused_infer_attention_score_v2(
            q, [k], [v], num_query_heads=4, num_key_value_heads=2, return_softmax_lse=True),
    ]
    for call in calls:
        real = call(q, k, v)
        with FakeTensorMode() as mode:
            fake = call(*(mode.from_tensor(t) for t in (q, k, v)))
        real = real if isinstance(real, tuple) else (real,)
        fake = fake if isinstance(fake, tuple) else (fake,)
        assert [tuple(t.shape) for t in fake] == [tuple(t.shape) for t in real]
        assert [t.dtype for t in fake] == [t.dtype for t in real]


def test_import_fia_torch_npu():
    import fia.torch_npu as torch_npu
    assert torch_npu.npu_fused_infer_attention_score is fia.npu_fused_infer_attention_score
    assert torch_npu.npu_incre_flash_attention is fia.npu_incre_flash_attention
    with pytest.raises(AttributeError, match="npu_rms_norm"):
        torch_npu.npu_rms_norm  # noqa: B018


def test_install_and_uninstall():
    import fia.torch_npu
    saved = sys.modules.get("torch_npu")
    sys.modules.pop("torch_npu", None)
    try:
        assert fia.torch_npu.install() is fia.torch_npu
        import torch_npu
        assert torch_npu is fia.torch_npu
        q, k, v = rand(1, 2, 3, 16, seed=17), rand(1, 2, 5, 16, seed=18), rand(1, 2, 5, 16, seed=19)
        a, _ = torch_npu.npu_fused_infer_attention_score(q, k, v, num_heads=2, input_layout="BNSD")
        b, _ = fia.npu_fused_infer_attention_score(q, k, v, num_heads=2, input_layout="BNSD")
        assert torch.equal(a, b)
        fia.torch_npu.uninstall()
        assert "torch_npu" not in sys.modules
        fia.torch_npu.uninstall()  # idempotent
        sys.modules["torch_npu"] = object()  # a "real" torch_npu already imported
        with pytest.raises(RuntimeError, match="already imported"):
            fia.torch_npu.install()
    finally:
        sys.modules.pop("torch_npu", None)
        if saved is not None:
            sys.modules["torch_npu"] = saved


CONCURRENT = """
import sys, threading
import numpy as np
import fia
threads_arg = int(sys.argv[1])
rng = np.random.default_rng(0)
jobs = []
for i in range(8):
    dtype = [np.float16, np.float32][i % 2]
    shape_kv = (2, 2, 200 + 16 * i, 64)
    jobs.append((rng.standard_normal((2, 4, 16, 64)).astype(dtype), rng.standard_normal(shape_kv).astype(dtype),
                 rng.standard_normal(shape_kv).astype(dtype)))

def call(q, k, v):
    return fia.npu_fused_infer_attention_score(q, k, v, num_heads=4, num_key_value_heads=2, input_layout="BNSD",
                                               scale=0.125, softmax_lse_flag=True, threads=threads_arg)

sequential = [call(*j) for j in jobs]
bad = []

def worker(t):
    for rep in range(5):
        for i in range(len(jobs)):
            idx = (i + t + rep) % len(jobs)
            out, lse = call(*jobs[idx])
            if not (np.array_equal(out, sequential[idx][0]) and np.array_equal(lse, sequential[idx][1])):
                bad.append(idx)

ts = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("mismatches", len(bad))
"""


def run_concurrent(threads_arg):
    import os
    import subprocess
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", CONCURRENT, str(threads_arg)], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, f"crashed with {r.returncode}: {r.stderr[-500:]}"
    assert "mismatches 0" in r.stdout, r.stdout


def test_concurrent_calls_single_worker_subprocess():
    run_concurrent(1)


def test_concurrent_calls_default_threads_subprocess():
    run_concurrent(0)


def test_concurrent_calls_from_threads_match_sequential():
    jobs = []
    for i in range(8):
        dtype = [torch.float16, torch.bfloat16, torch.float32][i % 3]
        q = rand(2, 4, 16, 64, dtype=dtype, seed=100 + i)
        k = rand(2, 2, 200 + 16 * i, 64, dtype=dtype, seed=200 + i)
        v = rand(2, 2, 200 + 16 * i, 64, dtype=dtype, seed=300 + i)
        jobs.append((q, k, v))

    def call(q, k, v):
        return fia.npu_fused_infer_attention_score(q, k, v, num_heads=4, num_key_value_heads=2,
                                                   input_layout="BNSD", scale=0.125, softmax_lse_flag=True)

    sequential = [call(*j) for j in jobs]
    results = [[None] * len(jobs) for _ in range(4)]
    errors = []
    barrier = threading.Barrier(4)

    def worker(t):
        try:
            barrier.wait()
            for rep in range(3):
                for i in range(len(jobs)):
                    idx = (i + t + rep) % len(jobs)
                    results[t][idx] = call(*jobs[idx])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    for t in range(4):
        for i, (out, lse) in enumerate(results[t]):
            assert torch.equal(out, sequential[i][0]) and torch.equal(lse, sequential[i][1])


def test_post_quant_int8_output_eager_compiled_and_fake():
    """quant_scale2 (FIA-SPEC 14): an int8 attention_out, the same under torch.compile, and the fake
    kernel says int8 too."""
    q, k, v = rand(2, 4, 6, 32, seed=21), rand(2, 2, 20, 32, seed=22), rand(2, 2, 20, 32, seed=23)
    scale2 = torch.full((4, 32), 60.0)
    offset2 = torch.linspace(-2.0, 2.0, 128).reshape(4, 32)
    kw = dict(num_heads=4, num_key_value_heads=2, input_layout="BNSD", scale=0.2, quant_scale2=scale2,
              quant_offset2=offset2)
    out, _ = fia.npu_fused_infer_attention_score(q, k, v, **kw)
    assert out.dtype == torch.int8 and out.shape == (2, 4, 6, 32)
    ref, _ = fia.npu_fused_infer_attention_score(q, k, v, **{**kw, "quant_scale2": None, "quant_offset2": None},
                                                 backend="reference")
    want = torch.clamp(torch.round(ref.float() * scale2[None, :, None, :] + offset2[None, :, None, :]), -128, 127)
    assert (out.float() - want).abs().max() <= 1            # fp16 ref output rounding: within 1
    compiled = torch.compile(lambda q, k, v: fia.npu_fused_infer_attention_score(q, k, v, **kw)[0], fullgraph=True)
    assert torch.equal(compiled(q, k, v), out)
    with FakeTensorMode() as mode:
        fake, _ = OP(*(mode.from_tensor(t) for t in (q,)), [mode.from_tensor(k)], [mode.from_tensor(v)],
                     **{**kw, "quant_scale2": mode.from_tensor(scale2), "quant_offset2": mode.from_tensor(offset2)})
    assert fake.dtype == torch.int8 and fake.shape == out.shape


def test_post_quant_rounding_golden_on_a_tie():
    """0.25 * 10 = 2.5 exactly: the device formula rounds half away (3), the golden half to even (2)."""
    q = torch.zeros(1, 1, 2, 16, dtype=torch.float16)
    k = torch.ones(1, 1, 5, 16, dtype=torch.float16)
    v = torch.full((1, 1, 5, 16), 0.25, dtype=torch.float16)
    scale2 = torch.tensor([10.0])
    for rounding, want in (("device", 3), ("golden", 2)):
        for arrays in ((q, k, v, scale2), tuple(t.numpy() for t in (q, k, v, scale2))):
            out, _ = fia.npu_fused_infer_attention_score(*arrays[:3], num_heads=1, input_layout="BNSD",
                                                         quant_scale2=arrays[3], post_quant_rounding=rounding)
            assert (torch.as_tensor(out) == want).all(), rounding
    with pytest.raises(ValueError, match="post_quant_rounding"):
        fia.npu_fused_infer_attention_score(q, k, v, num_heads=1, input_layout="BNSD", quant_scale2=scale2,
                                            post_quant_rounding="nearest")
