"""MLA full quantization (FIA-SPEC 13.3) from Python: an INT8 query and paged latent cache with
BF16 rope, dequant_scale_query (query_quant_mode 3) and per-tensor key/value_antiquant_scale give
a BF16 output equal to a numpy transcription of 13.3 over two 512-key chunks; the errors name the
parameter."""
import numpy as np
import pytest
import torch

import fia

FIA = fia.npu_fused_infer_attention_score


def case(seed=0, n=4, kv=600, block=128):
    """BSND, batch 1, Q_S 1, one KV head; the cache (block_num, 1, block, 512) in shuffled blocks."""
    rng = np.random.default_rng(seed)
    blocks = (kv + block - 1) // block
    q = rng.integers(-127, 128, size=(1, 1, n, 512), dtype=np.int8)
    k = rng.integers(-127, 128, size=(blocks, 1, block, 512), dtype=np.int8)
    qr = torch.from_numpy(rng.uniform(-100, 100, size=(1, 1, n, 64)).astype(np.float32)).bfloat16()
    kr = torch.from_numpy(rng.uniform(-100, 100, size=(blocks, 1, block, 64)).astype(np.float32)).bfloat16()
    table = rng.permutation(blocks).astype(np.int32)[None, :]
    dq = rng.uniform(0.5, 1.5, size=(1, 1, n)).astype(np.float32) * np.float32(0.03)
    return q, k, qr, kr, table, dq


def transcription(q, k, qr, kr, table, dq, kv, key_scale, value_scale, scale, block):
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


def call(q, k, qr, kr, table, dq, kv, **kw):
    args = dict(query_rope=qr, key_rope=kr, block_table=torch.from_numpy(table), block_size=k.shape[2],
                actual_seq_lengths_kv=[kv], num_heads=q.shape[2], num_key_value_heads=1, input_layout="BSND",
                scale=1 / 24, dequant_scale_query=torch.from_numpy(dq), query_quant_mode=3,
                key_antiquant_scale=torch.tensor([1 / 64]), value_antiquant_scale=torch.tensor([1 / 50]))
    args.update(kw)
    return FIA(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(k), **args)


def test_matches_a_transcription_of_13_3():
    q, k, qr, kr, table, dq = case()
    out, _ = call(q, k, qr, kr, table, dq, 600)
    assert out.dtype == torch.bfloat16 and tuple(out.shape) == (1, 1, 4, 512)
    want = transcription(q, k, qr, kr, table, dq, 600, 1 / 64, 1 / 50, 1 / 24, 128)
    np.testing.assert_allclose(out.float().numpy()[0, 0], want, rtol=2**-7, atol=1e-4)


def test_errors_name_the_parameter():
    q, k, qr, kr, table, dq = case(1, kv=100)
    with pytest.raises(ValueError, match="query_quant_mode"):
        call(q, k, qr, kr, table, dq, 100, query_quant_mode=0)
    with pytest.raises(ValueError, match="dequant_scale_query"):
        call(q, k, qr, kr, table, dq[:, :, :2], 100)
    with pytest.raises(ValueError, match="value_antiquant_scale"):
        call(q, k, qr, kr, table, dq, 100, value_antiquant_scale=torch.tensor([1.0, 2.0]))
