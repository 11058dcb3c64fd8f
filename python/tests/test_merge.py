"""fia.merge_attention_states (FIA-SPEC 17): two calls over disjoint key sets, merged, equal the
call over all keys within criterion A; an empty part leaves the other unchanged, bit for bit."""
import numpy as np
import pytest
import torch

import fia
from judge import criterion_a, lse_match

NAMES = {torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32"}


def attention(q, k, v, layout, **kw):
    return fia.npu_fused_infer_attention_score(q, k, v, num_heads=8, num_key_value_heads=2, input_layout=layout,
                                               scale=0.125, softmax_lse_flag=True, **kw)


def split_and_merge(dtype, layout):
    """(merged out, merged lse, whole out, whole lse, part a, lse a, part b, lse b, the whole call
    over |V| (the scale of every rounding of P), reference backend)."""
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 8, 5, 32, generator=g).to(dtype)
    k = torch.randn(2, 2, 90, 32, generator=g).to(dtype)
    v = torch.randn(2, 2, 90, 32, generator=g).to(dtype)
    src = layout.split("_")[0]

    def to(x):  # BNSD -> the input layout
        return {"BNSD": x, "BSND": x.transpose(1, 2), "BSH": x.transpose(1, 2).flatten(2)}[src].contiguous()

    whole, whole_lse = attention(to(q), to(k), to(v), layout, backend="reference")
    a, lse_a = attention(to(q), to(k[:, :, :37]), to(v[:, :, :37]), layout)
    b, lse_b = attention(to(q), to(k[:, :, 37:]), to(v[:, :, 37:]), layout)
    out, lse = fia.merge_attention_states(a, lse_a, b, lse_b, input_layout=layout)
    assert out.dtype == dtype and out.shape == whole.shape and lse.shape == whole_lse.shape
    abs_v, _ = attention(to(q.float()), to(k.float()), to(v.float().abs()), layout, backend="reference")
    return out, lse, whole, whole_lse, a, lse_a, b, lse_b, abs_v


def weights(layout, out, lse_a, lse_b):
    """exp(lse_x - lse) of each output element, in float64, in the output's layout."""
    la, lb = lse_a.double().squeeze(-1), lse_b.double().squeeze(-1)   # [B, N, S]
    lse = torch.logaddexp(la, lb)
    wa, wb = torch.exp(la - lse), torch.exp(lb - lse)
    out_layout = layout.split("_")[-1]
    if out_layout == "BNSD":
        return wa[..., None], wb[..., None]
    wa, wb = wa.transpose(1, 2)[..., None], wb.transpose(1, 2)[..., None]   # [B, S, N, 1]
    if out_layout == "BSH":
        return (wa.expand(*wa.shape[:3], out.shape[-1] // wa.shape[2]).flatten(2),
                wb.expand(*wb.shape[:3], out.shape[-1] // wb.shape[2]).flatten(2))
    return wa, wb


@pytest.mark.parametrize("layout", ["BNSD", "BSND", "BSH", "BNSD_BSND"])
def test_two_f32_halves_merge_to_the_whole_call_within_criterion_a(layout):
    out, lse, whole, whole_lse, *_ = split_and_merge(torch.float32, layout)
    assert criterion_a(out.numpy(), whole.numpy(), "F32") == ""
    assert lse_match(lse.numpy(), whole_lse.numpy()) == ""


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["BNSD", "BSND", "BSH", "BNSD_BSND"])
def test_16_bit_halves_merge_with_one_rounding(dtype, layout):
    """The merge adds one rounding to the error its 16-bit parts carry: it equals the float64
    merge of the given parts, rounded once; and it is as close to the whole call as those parts'
    own roundings (of P and of their outputs) allow. Criterion A itself can fail where the parts
    cancel (docs/python.md)."""
    out, lse, whole, whole_lse, a, lse_a, b, lse_b, abs_v = split_and_merge(dtype, layout)
    wa, wb = weights(layout, out, lse_a, lse_b)
    exact = wa * a.double() + wb * b.double()
    u = 2.0 ** -11 if dtype == torch.float16 else 2.0 ** -8           # unit roundoff
    # one rounding of the float64 merge (ties of the last bit may go either way)
    assert ((out.double() - exact).abs() <= 2 * u * exact.abs() + 1e-7).all()
    assert (out == exact.to(dtype)).double().mean() >= 0.99
    assert lse_match(lse.numpy(), whole_lse.numpy()) == ""
    parts = wa * a.double().abs() + wb * b.double().abs()
    bound = 2.5e-5 + 0.005 * whole.double().abs() + 2 * u * (parts + abs_v.double()) + u * exact.abs()
    assert ((out.double() - whole.double()).abs() <= bound).all()


def test_tnd_with_a_batch_whose_second_part_is_empty():
    g = torch.Generator().manual_seed(4)
    q = torch.randn(7, 8, 16, generator=g).half()     # two batches: 3 + 4 query tokens
    k = torch.randn(30, 2, 16, generator=g).half()
    v = torch.randn(30, 2, 16, generator=g).half()
    whole, whole_lse = attention(q, k, v, "TND", actual_seq_lengths=[3, 7], actual_seq_lengths_kv=[10, 30],
                                 backend="reference")
    # part a: each batch's first 10 keys; part b: the rest (none for batch 0)
    a, lse_a = attention(q, torch.cat([k[:10], k[10:20]]), torch.cat([v[:10], v[10:20]]), "TND",
                         actual_seq_lengths=[3, 7], actual_seq_lengths_kv=[10, 20])
    b, lse_b = attention(q, k[20:], v[20:], "TND", actual_seq_lengths=[3, 7], actual_seq_lengths_kv=[0, 10])
    assert torch.isinf(lse_b[:3]).all()
    out, lse = fia.merge_attention_states(a, lse_a, b, lse_b, input_layout="TND")
    assert torch.equal(out[:3].view(torch.int16), a[:3].view(torch.int16))
    assert torch.equal(lse[:3], lse_a[:3])
    assert criterion_a(out.float().numpy(), whole.float().numpy(), "F16") == ""
    assert lse_match(lse.numpy(), whole_lse.numpy()) == ""


def test_numpy_in_numpy_out_and_errors():
    rng = np.random.default_rng(5)
    out_a = rng.standard_normal((1, 2, 3, 4)).astype(np.float16)
    out_b = rng.standard_normal((1, 2, 3, 4)).astype(np.float16)
    lse_a = rng.standard_normal((1, 2, 3, 1)).astype(np.float32)
    lse_b = np.full((1, 2, 3, 1), np.inf, dtype=np.float32)
    out, lse = fia.merge_attention_states(out_a, lse_a, out_b, lse_b)
    assert isinstance(out, np.ndarray) and np.array_equal(out.view(np.int16), out_a.view(np.int16))
    assert np.array_equal(lse, lse_a)
    # equal LSEs: the mean of the two parts, lse + ln 2
    out, lse = fia.merge_attention_states(out_a, lse_a, out_b, lse_a)
    want = (out_a.astype(np.float64) + out_b.astype(np.float64)) / 2
    assert np.abs(out.astype(np.float64) - want).max() <= 1e-3
    assert np.allclose(lse, lse_a + np.log(2), atol=1e-6)
    with pytest.raises(ValueError, match="out_b"):
        fia.merge_attention_states(out_a, lse_a, out_b[:, :1], lse_b)
    with pytest.raises(TypeError, match="lse_a"):
        fia.merge_attention_states(out_a, lse_a.astype(np.float16), out_b, lse_b)
    with pytest.raises(ValueError, match="input_layout"):
        fia.merge_attention_states(out_a, lse_a, out_b, lse_b, input_layout="BXSD")


def test_merge_under_torch_compile():
    g = torch.Generator().manual_seed(6)
    out_a, out_b = torch.randn(1, 4, 2, 8, generator=g), torch.randn(1, 4, 2, 8, generator=g)
    lse_a, lse_b = torch.randn(1, 4, 2, 1, generator=g), torch.randn(1, 4, 2, 1, generator=g)
    eager = fia.merge_attention_states(out_a, lse_a, out_b, lse_b)
    compiled = torch.compile(fia.merge_attention_states, fullgraph=True)(out_a, lse_a, out_b, lse_b)
    assert torch.equal(eager[0], compiled[0]) and torch.equal(eager[1], compiled[1])
