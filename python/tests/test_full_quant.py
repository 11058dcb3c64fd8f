"""Int8 full quantization (FIA-SPEC 13.1-13.2) from Python: int8 numpy arrays and torch tensors,
FLOAT32 and UINT64 dequant scales, the PromptFlashAttention spelling (deq_scale1, deq_scale2), an
independent numpy transcription of the one-chunk pipeline, int8 output, and the errors. MLA full
quantization (13.3): an INT8 query and paged latent cache with BF16 rope, dequant_scale_query
(query_quant_mode 3) and per-tensor key/value_antiquant_scale give a BF16 output equal to a numpy
transcription of 13.3 over two 512-key chunks; its errors name the parameter."""
import numpy as np
import pytest
import torch

import fia

FIA = fia.npu_fused_infer_attention_score
PFA = fia.npu_prompt_flash_attention


def case(seed=0, b=2, n=2, s=5, kv=300, d=64):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.integers(-127, 128, size=shape, dtype=np.int8) for shape in
               ((b, n, s, d), (b, n, kv, d), (b, n, kv, d)))
    return q, k, v


def as_u64(x):
    """A float32 scale as UINT64 carrying its bits in the low 32 bits (FIA-SPEC 13.1)."""
    return np.array([np.float32(x)]).view(np.uint32).astype(np.uint64)


def f16(x):
    return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)


def trunc19(x):
    return (np.array([x], np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)[0]


def pipeline(q, k, v, dq1, qs1, dq2, scale):
    """FIA-SPEC 13.1 for at most 1024 keys (one chunk), in numpy: fp32 products, fp16 roundings."""
    a = (np.matmul(q.astype(np.int32), k.astype(np.int32).swapaxes(-1, -2)).astype(np.float32) *
         trunc19(dq1))
    a = f16(np.clip(a, -65504, 65504))
    a = f16(a * f16(scale))
    m = a.max(-1, keepdims=True)
    e = f16(np.exp(a.astype(np.float64) - m).astype(np.float32))
    l = np.exp(a.astype(np.float64) - m).sum(-1, keepdims=True).astype(np.float32)
    p = np.clip(np.rint(f16(e * f16(qs1))), -128, 127).astype(np.int32)
    o = np.matmul(p, v.astype(np.int32)).astype(np.float32) * trunc19(dq2)
    return (o / f16(l)).astype(np.float16), np.log(l.astype(np.float64)) + m


@pytest.mark.parametrize("u64", [False, True], ids=["f32_scales", "u64_scales"])
def test_numpy_matches_a_transcription_of_the_pipeline(u64):
    q, k, v = case()
    dq1, qs1, dq2, scale = 0.000123, 127.0, 1.0 / (127 * 16), 0.125
    scales = [as_u64(dq1), np.array([qs1], np.float32), as_u64(dq2)] if u64 else \
        [np.array([x], np.float32) for x in (dq1, qs1, dq2)]
    out, lse = FIA(q, k, v, num_heads=2, input_layout="BNSD", scale=scale, softmax_lse_flag=True,
                   dequant_scale1=scales[0], quant_scale1=scales[1], dequant_scale2=scales[2])
    want, want_lse = pipeline(q, k, v, dq1, qs1, dq2, scale)
    assert out.dtype == np.float16 and out.shape == want.shape
    same = out == want
    assert same.mean() >= 0.99, same.mean()
    np.testing.assert_allclose(out.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=1e-4)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)


def test_prompt_flash_attention_spelling_and_torch_tensors_agree():
    q, k, v = case(1, s=7)
    kw = dict(num_heads=2, input_layout="BNSD")
    out_fia, _ = FIA(q, k, v, scale=0.1, dequant_scale1=as_u64(0.0002), quant_scale1=np.array([127.0], np.float32),
                     dequant_scale2=as_u64(0.0005), **kw)
    out_pfa = PFA(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), scale_value=0.1,
                  deq_scale1=torch.from_numpy(as_u64(0.0002)), quant_scale1=torch.tensor([127.0]),
                  deq_scale2=torch.from_numpy(as_u64(0.0005)), next_tokens=2**31 - 1, **kw)
    assert out_pfa.dtype == torch.float16
    np.testing.assert_array_equal(out_pfa.numpy(), out_fia)


def test_int8_output_with_quant_scale2():
    q, k, v = case(2)
    scales = dict(dequant_scale1=np.array([0.0002], np.float32), quant_scale1=np.array([127.0], np.float32),
                  dequant_scale2=np.array([0.0005], np.float32))
    out16, _ = FIA(q, k, v, num_heads=2, input_layout="BNSD", scale=0.1, **scales)
    out8, _ = FIA(q, k, v, num_heads=2, input_layout="BNSD", scale=0.1, quant_scale2=np.array([20.0], np.float32),
                  **scales)
    assert out8.dtype == np.int8
    # The device formula on the same O (fp16 output rounds O, so compare within 1).
    assert np.abs(out8.astype(np.int32) - np.clip(np.round(out16.astype(np.float32) * 20), -128, 127)).max() <= 1


def test_errors_name_the_parameter():
    q, k, v = case(3)
    one = np.array([0.01], np.float32)
    with pytest.raises(ValueError, match="key"):
        FIA(q, k.astype(np.float16), v.astype(np.float16), num_heads=2, input_layout="BNSD",
            dequant_scale1=one, quant_scale1=one, dequant_scale2=one)
    with pytest.raises(ValueError, match="quant_scale1"):
        FIA(q, k, v, num_heads=2, input_layout="BNSD", dequant_scale1=one, dequant_scale2=one)
    with pytest.raises(ValueError, match="deq_scale1"):
        PFA(q, k, v, num_heads=2, input_layout="BNSD", deq_scale1=np.array([1], np.uint64) << np.uint64(40),
            quant_scale1=one, deq_scale2=one)


def mla_case(seed=0, n=4, kv=600, block=128):
    """MLA full quant (FIA-SPEC 13.3): BSND, batch 1, Q_S 1, one KV head; the cache (block_num, 1,
    block, 512) in shuffled blocks."""
    rng = np.random.default_rng(seed)
    blocks = (kv + block - 1) // block
    q = rng.integers(-127, 128, size=(1, 1, n, 512), dtype=np.int8)
    k = rng.integers(-127, 128, size=(blocks, 1, block, 512), dtype=np.int8)
    qr = torch.from_numpy(rng.uniform(-100, 100, size=(1, 1, n, 64)).astype(np.float32)).bfloat16()
    kr = torch.from_numpy(rng.uniform(-100, 100, size=(blocks, 1, block, 64)).astype(np.float32)).bfloat16()
    table = rng.permutation(blocks).astype(np.int32)[None, :]
    dq = rng.uniform(0.5, 1.5, size=(1, 1, n)).astype(np.float32) * np.float32(0.03)
    return q, k, qr, kr, table, dq


def mla_transcription(q, k, qr, kr, table, dq, kv, key_scale, value_scale, scale):
    """13.3: S = (Q·K + Qrope·Krope) * dq * key_scale * scale; per 512-key chunk P = round(127
    exp(S - chunk max)); O = sum exp(chunk max - m) P·K / 127 / l * value_scale."""
    rows = np.concatenate([k[b, 0] for b in table[0]])[:kv].astype(np.float64)
    rope = np.concatenate([kr[b, 0].double().numpy() for b in table[0]])[:kv]
    out = np.zeros((q.shape[2], 512))
    for n in range(q.shape[2]):
        s = (rows @ q[0, 0, n].astype(np.float64) + rope @ qr[0, 0, n].double().numpy()) * \
            float(dq[0, 0, n]) * key_scale * scale
        m, l, o = -np.inf, 0.0, np.zeros(512)
        for c0 in range(0, kv, 512):
            x = s[c0:c0 + 512]
            mc = x.max()
            mn = max(m, mc)
            e = np.exp(x - mc)
            o = o * np.exp(m - mn) + (np.round(127 * e) @ rows[c0:c0 + 512]) * np.exp(mc - mn) / 127
            l = l * np.exp(m - mn) + e.sum() * np.exp(mc - mn)
            m = mn
        out[n] = o / l * value_scale
    return out


def mla_call(q, k, qr, kr, table, dq, kv, **kw):
    args = dict(query_rope=qr, key_rope=kr, block_table=torch.from_numpy(table), block_size=k.shape[2],
                actual_seq_lengths_kv=[kv], num_heads=q.shape[2], num_key_value_heads=1, input_layout="BSND",
                scale=1 / 24, dequant_scale_query=torch.from_numpy(dq), query_quant_mode=3,
                key_antiquant_scale=torch.tensor([1 / 64]), value_antiquant_scale=torch.tensor([1 / 50]))
    args.update(kw)
    return FIA(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(k), **args)


def test_mla_full_quant_matches_a_transcription_of_13_3():
    q, k, qr, kr, table, dq = mla_case()
    out, _ = mla_call(q, k, qr, kr, table, dq, 600)
    assert out.dtype == torch.bfloat16 and tuple(out.shape) == (1, 1, 4, 512)
    want = mla_transcription(q, k, qr, kr, table, dq, 600, 1 / 64, 1 / 50, 1 / 24)
    np.testing.assert_allclose(out.float().numpy()[0, 0], want, rtol=2**-7, atol=1e-4)


def test_mla_full_quant_errors_name_the_parameter():
    q, k, qr, kr, table, dq = mla_case(1, kv=100)
    with pytest.raises(ValueError, match="query_quant_mode"):
        mla_call(q, k, qr, kr, table, dq, 100, query_quant_mode=0)
    with pytest.raises(ValueError, match="dequant_scale_query"):
        mla_call(q, k, qr, kr, table, dq[:, :, :2], 100)
    with pytest.raises(ValueError, match="value_antiquant_scale"):
        mla_call(q, k, qr, kr, table, dq, 100, value_antiquant_scale=torch.tensor([1.0, 2.0]))
