"""fia against torch.nn.functional.scaled_dot_product_attention (computed in float64 from the same
inputs). fp16 / bf16 results are judged with FIA-SPEC 21.1 criterion A, fp32 with a tight tolerance."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import fia

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def criterion_a(actual, expected, dtype):
    a = actual.to(torch.float64)
    e = expected.to(torch.float64)
    atol, rtol = (2.5e-5, 0.005) if dtype == torch.float16 else (1e-4, 2.0 ** -7)
    ok = (a - e).abs() <= atol + rtol * e.abs()
    frac = ok.double().mean().item()
    assert frac >= 0.995, f"only {frac:.4f} of elements within criterion A (max err {(a - e).abs().max():.3g})"


def sdpa(q, k, v, *, mask=None, scale, enable_gqa=False):
    """float64 SDPA over BNSD tensors; `mask` is SDPA's boolean (True = keep)."""
    return F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask, scale=scale,
                                          enable_gqa=enable_gqa)


def golden(q, k, v, *, mask=None, scale, enable_gqa=False, ifa=False):
    """float64 attention with FIA-SPEC 5 step 7: the unnormalised exponentials rounded to the input
    dtype before P.V (what the operator specifies for fp16 / bf16); the IFA entry point normalises
    P first and rounds it only for fp16 (FIA-SPEC 25.3)."""
    if enable_gqa:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    s = (q.double() @ k.double().transpose(-1, -2) * scale).float().double()
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    e = torch.exp(s - s.amax(-1, keepdim=True))
    if ifa:
        p = e / e.sum(-1, keepdim=True)
        return (p.to(q.dtype).double() if q.dtype == torch.float16 else p) @ v.double()
    return (e.to(q.dtype).double() @ v.double()) / e.sum(-1, keepdim=True)


def check(actual, q, k, v, *, mask=None, scale, enable_gqa=False, ifa=False):
    """actual (BNSD) against SDPA in float64: fp32 tightly; fp16 / bf16 within a few output ulps of
    SDPA everywhere and within criterion A of the step-7 golden."""
    dtype = q.dtype
    assert actual.dtype == dtype
    expected = sdpa(q, k, v, mask=mask, scale=scale, enable_gqa=enable_gqa)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    a = actual.double()
    assert torch.isfinite(a).all()
    if dtype == torch.float32:
        torch.testing.assert_close(a, expected, atol=2e-5, rtol=1e-4)
        return
    tol = dict(atol=2e-3, rtol=1e-2) if dtype == torch.float16 else dict(atol=1e-2, rtol=4e-2)
    torch.testing.assert_close(a, expected, **tol)
    criterion_a(a, golden(q, k, v, mask=mask, scale=scale, enable_gqa=enable_gqa, ifa=ifa), dtype)


def rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def bnsd_to(x, layout):
    """A contiguous BNSD tensor in `layout`."""
    b, n, s, d = x.shape
    if layout == "BNSD":
        return x.contiguous()
    if layout == "BSND":
        return x.transpose(1, 2).contiguous()
    if layout == "BSH":
        return x.transpose(1, 2).reshape(b, s, n * d).contiguous()
    raise ValueError(layout)


def to_bnsd(x, layout, n):
    if layout == "BNSD":
        return x
    if layout == "BSND":
        return x.transpose(1, 2)
    b, s, h = x.shape
    return x.reshape(b, s, n, h // n).transpose(1, 2)


def qkv(b=2, n=4, kv_n=4, qs=8, kvs=24, d=64, dtype=torch.float32, seed=0):
    return (rand(b, n, qs, d, dtype=dtype, seed=seed), rand(b, kv_n, kvs, d, dtype=dtype, seed=seed + 1),
            rand(b, kv_n, kvs, d, dtype=dtype, seed=seed + 2))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["BNSD", "BSND", "BSH"])
def test_full_attention_matches_sdpa(dtype, layout):
    q, k, v = qkv(dtype=dtype)
    scale = 1 / math.sqrt(64)
    out, lse = fia.npu_fused_infer_attention_score(
        bnsd_to(q, layout), bnsd_to(k, layout), bnsd_to(v, layout), num_heads=4, input_layout=layout, scale=scale)
    assert out.dtype == dtype
    assert lse.shape == (1,) and lse.item() == 0.0
    check(to_bnsd(out, layout, 4), q, k, v, scale=scale)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_lse_matches_logsumexp(dtype):
    q, k, v = qkv(dtype=dtype, seed=3)
    scale = 0.125
    _, lse = fia.npu_fused_infer_attention_score(q, k, v, num_heads=4, input_layout="BNSD", scale=scale,
                                                 softmax_lse_flag=True)
    assert lse.dtype == torch.float32 and lse.shape == (2, 4, 8, 1)
    ref = torch.logsumexp(q.double() @ k.double().transpose(-1, -2) * scale, dim=-1, keepdim=True)
    torch.testing.assert_close(lse.double(), ref, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kv_n", [1, 2])
def test_gqa_matches_sdpa_enable_gqa(dtype, kv_n):
    q, k, v = qkv(n=8, kv_n=kv_n, dtype=dtype, seed=5)
    out, _ = fia.npu_fused_infer_attention_score(q, k, v, num_heads=8, num_key_value_heads=kv_n,
                                                 input_layout="BNSD", scale=0.125)
    check(out, q, k, v, scale=0.125, enable_gqa=True)


def bottom_right_keep(qs, kvs):
    """SDPA boolean mask (True = keep) of causal attention aligned to the bottom-right corner."""
    i = torch.arange(qs)[:, None]
    j = torch.arange(kvs)[None, :]
    return j <= i + (kvs - qs)


COMPRESSED = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), 1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["BNSD", "BSH"])
def test_causal_bottom_right_sparse_mode_3(dtype, layout):
    q, k, v = qkv(qs=8, kvs=40, dtype=dtype, seed=7)
    out, _ = fia.npu_fused_infer_attention_score(
        bnsd_to(q, layout), bnsd_to(k, layout), bnsd_to(v, layout), num_heads=4, input_layout=layout,
        scale=0.125, sparse_mode=3, atten_mask=COMPRESSED)
    check(to_bnsd(out, layout, 4), q, k, v, scale=0.125, mask=bottom_right_keep(8, 40))
    expected = sdpa(q, k, v, scale=0.125, mask=bottom_right_keep(8, 40))
    # SDPA's own is_causal is top-left aligned: a different result when Q_S < KV_S.
    top_left = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True, scale=0.125)
    assert not torch.allclose(top_left, expected, atol=1e-2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_causal_top_left_sparse_mode_2_matches_is_causal(dtype):
    q, k, v = qkv(qs=8, kvs=40, dtype=dtype, seed=8)
    out, _ = fia.npu_fused_infer_attention_score(q, k, v, num_heads=4, input_layout="BNSD", scale=0.125,
                                                 sparse_mode=2, atten_mask=COMPRESSED)
    top_left = torch.ones(8, 40, dtype=torch.bool).tril()
    expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True, scale=0.125)
    torch.testing.assert_close(sdpa(q, k, v, scale=0.125, mask=top_left), expected)
    check(out, q, k, v, scale=0.125, mask=top_left)


@pytest.mark.parametrize("dtype", DTYPES)
def test_explicit_bool_mask_inverted_polarity(dtype):
    q, k, v = qkv(qs=8, kvs=24, dtype=dtype, seed=9)
    g = torch.Generator().manual_seed(11)
    masked = torch.rand(2, 1, 8, 24, generator=g) < 0.4  # FIA: True = masked
    masked[..., 0] = False  # every row keeps at least one key
    out, _ = fia.npu_fused_infer_attention_score(q, k, v, num_heads=4, input_layout="BNSD", scale=0.125,
                                                 atten_mask=masked)
    check(out, q, k, v, scale=0.125, mask=~masked)
    # Polarity matters: the unmasked result differs.
    plain = sdpa(q, k, v, scale=0.125)
    assert not torch.allclose(out.double(), plain, atol=1e-2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("layout", ["BNSD", "BSH"])
def test_numpy_path_bit_identical_to_torch_path(dtype, layout):
    q, k, v = qkv(dtype=dtype, seed=12)
    args = [bnsd_to(x, layout) for x in (q, k, v)]
    kw = dict(num_heads=4, input_layout=layout, scale=0.125, softmax_lse_flag=True, sparse_mode=3,
              atten_mask=COMPRESSED)
    out_t, lse_t = fia.npu_fused_infer_attention_score(*args, **kw)
    if dtype == torch.bfloat16:
        import ml_dtypes
        np_args = [x.view(torch.uint16).numpy().view(ml_dtypes.bfloat16) for x in args]
    else:
        np_args = [x.numpy() for x in args]
    kw["atten_mask"] = COMPRESSED.numpy()
    out_n, lse_n = fia.npu_fused_infer_attention_score(*np_args, **kw)
    assert isinstance(out_n, np.ndarray) and isinstance(lse_n, np.ndarray)
    if dtype == torch.bfloat16:
        out_n = torch.from_numpy(out_n.view(np.uint16)).view(torch.bfloat16)
    else:
        out_n = torch.from_numpy(out_n)
    assert out_n.dtype == out_t.dtype
    assert torch.equal(out_n.view(torch.uint8), out_t.view(torch.uint8))
    assert np.array_equal(lse_n, lse_t.numpy())


def band_keep(qs, kvs, pre, nxt):
    """SDPA boolean mask of the sparse-mode-0 band (top-left anchored): i - pre <= j <= i + next."""
    i = torch.arange(qs)[:, None]
    j = torch.arange(kvs)[None, :]
    return (j >= i - pre) & (j <= i + nxt)


@pytest.mark.parametrize("dtype", DTYPES)
def test_prompt_flash_attention_full(dtype):
    q, k, v = qkv(qs=16, kvs=16, dtype=dtype, seed=13)
    full = fia.npu_prompt_flash_attention(q, k, v, num_heads=4, input_layout="BNSD", scale_value=0.125,
                                          next_tokens=65535)
    check(full, q, k, v, scale=0.125)


@pytest.mark.parametrize("dtype", DTYPES)
def test_prompt_flash_attention_explicit_band(dtype):
    q, k, v = qkv(qs=16, kvs=16, dtype=dtype, seed=13)
    no_mask = torch.zeros(16, 16, dtype=torch.bool)  # sparse_mode 0 applies the band only with a mask
    out = fia.npu_prompt_flash_attention(q, k, v, num_heads=4, input_layout="BNSD", scale_value=0.125,
                                         atten_mask=no_mask, pre_tokens=3, next_tokens=2)
    check(out, q, k, v, scale=0.125, mask=band_keep(16, 16, 3, 2))


def _pfa_default_band(q, k, v, mask):
    return fia.npu_prompt_flash_attention(q, k, v, num_heads=4, input_layout="BNSD", scale_value=0.125,
                                          atten_mask=mask)


def test_prompt_flash_attention_default_next_tokens_numpy():
    """torch_npu's default next_tokens=0 with a mask: the band j <= i (FIA-SPEC 6.4, mode 0)."""
    q, k, v = qkv(qs=16, kvs=16, seed=13)
    out = _pfa_default_band(q.numpy(), k.numpy(), v.numpy(), np.zeros((16, 16), dtype=bool))
    check(torch.from_numpy(out), q, k, v, scale=0.125, mask=band_keep(16, 16, 1 << 30, 0))


def test_prompt_flash_attention_default_next_tokens_torch():
    q, k, v = qkv(qs=16, kvs=16, seed=13)
    out = _pfa_default_band(q, k, v, torch.zeros(16, 16, dtype=torch.bool))
    check(out, q, k, v, scale=0.125, mask=band_keep(16, 16, 1 << 30, 0))


@pytest.mark.parametrize("dtype", DTYPES)
def test_incre_flash_attention_decode(dtype):
    q, k, v = qkv(n=8, kv_n=2, qs=1, kvs=50, dtype=dtype, seed=14)
    out = fia.npu_incre_flash_attention(bnsd_to(q, "BSH"), bnsd_to(k, "BSH"), bnsd_to(v, "BSH"), num_heads=8,
                                        num_key_value_heads=2, input_layout="BSH", scale_value=0.125)
    assert out.shape == (2, 1, 8 * 64)
    check(to_bnsd(out, "BSH", 8), q, k, v, scale=0.125, enable_gqa=True, ifa=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_v2_matches_sdpa(dtype):
    q, k, v = qkv(qs=8, kvs=32, dtype=dtype, seed=15)
    out, lse = fia.npu_fused_infer_attention_score_v2(
        bnsd_to(q, "BSND"), bnsd_to(k, "BSND"), bnsd_to(v, "BSND"), num_query_heads=4, input_layout="BSND",
        softmax_scale=0.125, sparse_mode=3, atten_mask=COMPRESSED, actual_seq_kvlen=[32, 20],
        return_softmax_lse=True)
    assert lse.shape == (2, 4, 8, 1)
    out = to_bnsd(out, "BSND", 4)
    for b, kv_len in enumerate([32, 20]):
        check(out[b:b + 1], q[b:b + 1], k[b:b + 1, :, :kv_len], v[b:b + 1, :, :kv_len], scale=0.125,
              mask=bottom_right_keep(8, kv_len))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_paged_kv_decode_bsh(dtype):
    b, n, kv_n, d, bs = 3, 8, 2, 64, 128
    lengths = [300, 129, 40]
    max_blocks = 3
    q = rand(b, n, 1, d, dtype=dtype, seed=16)
    k_full = rand(b, kv_n, max_blocks * bs, d, dtype=dtype, seed=17)
    v_full = rand(b, kv_n, max_blocks * bs, d, dtype=dtype, seed=18)
    num_blocks = b * max_blocks + 2
    perm = torch.randperm(num_blocks, generator=torch.Generator().manual_seed(19))
    block_table = perm[:b * max_blocks].reshape(b, max_blocks).to(torch.int32)
    k_cache = torch.zeros(num_blocks, bs, kv_n * d, dtype=dtype)
    v_cache = torch.zeros(num_blocks, bs, kv_n * d, dtype=dtype)
    k_bsh, v_bsh = bnsd_to(k_full, "BSH"), bnsd_to(v_full, "BSH")
    for i in range(b):
        for j in range(max_blocks):
            k_cache[block_table[i, j]] = k_bsh[i, j * bs:(j + 1) * bs]
            v_cache[block_table[i, j]] = v_bsh[i, j * bs:(j + 1) * bs]
    out, _ = fia.npu_fused_infer_attention_score(
        bnsd_to(q, "BSH"), k_cache, v_cache, num_heads=n, num_key_value_heads=kv_n, input_layout="BSH",
        scale=0.125, block_table=block_table, block_size=bs, actual_seq_lengths_kv=lengths)
    out = to_bnsd(out, "BSH", n)
    for i, length in enumerate(lengths):
        check(out[i:i + 1], q[i:i + 1], k_full[i:i + 1, :, :length], v_full[i:i + 1, :, :length], scale=0.125,
              enable_gqa=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("as_tensor", [False, True])
def test_actual_seq_lengths_kv(dtype, as_tensor):
    q, k, v = qkv(qs=4, kvs=30, dtype=dtype, seed=20)
    lengths = [30, 7]
    arg = torch.tensor(lengths) if as_tensor else lengths
    out, _ = fia.npu_fused_infer_attention_score(q, k, v, num_heads=4, input_layout="BNSD", scale=0.125,
                                                 actual_seq_lengths_kv=arg)
    for b, length in enumerate(lengths):
        check(out[b:b + 1], q[b:b + 1], k[b:b + 1, :, :length], v[b:b + 1, :, :length], scale=0.125)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["BSH", "BNSD"])
def test_tensor_list_kv(dtype, layout):
    lengths = [5, 33, 17]
    q = rand(3, 4, 2, 64, dtype=dtype, seed=21)
    ks = [rand(1, 4, s, 64, dtype=dtype, seed=22 + i) for i, s in enumerate(lengths)]
    vs = [rand(1, 4, s, 64, dtype=dtype, seed=32 + i) for i, s in enumerate(lengths)]
    out, _ = fia.npu_fused_infer_attention_score(
        bnsd_to(q, layout), [bnsd_to(x, layout) for x in ks], [bnsd_to(x, layout) for x in vs], num_heads=4,
        input_layout=layout, scale=0.125)
    out = to_bnsd(out, layout, 4)
    for b in range(3):
        check(out[b:b + 1], q[b:b + 1], ks[b], vs[b], scale=0.125)
