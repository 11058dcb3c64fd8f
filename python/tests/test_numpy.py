"""numpy arrays in and out: dtypes (bfloat16 via ml_dtypes), strided inputs, torch inputs by
address against numpy, empty tensors (FIA-SPEC 19), the [1] zero softmax_lse, and integer lists
given as arrays or tensors."""
import ml_dtypes
import numpy as np
import pytest
import torch

import fia

FIA = fia.npu_fused_infer_attention_score
BF16 = np.dtype(ml_dtypes.bfloat16)
NP_DTYPES = [np.dtype(np.float16), np.dtype(np.float32), BF16]


def rand(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def to_torch(x):
    if x.dtype == BF16:
        return torch.from_numpy(np.ascontiguousarray(x).view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(x))


def reference(q, k, v, scale):
    """float64 attention over BNSD numpy arrays (no rounding)."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = q @ k.swapaxes(-1, -2) * scale
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v, np.log(e.sum(-1, keepdims=True)) + s.max(-1, keepdims=True)


@pytest.mark.parametrize("dtype", NP_DTYPES, ids=str)
def test_numpy_in_numpy_out(dtype):
    q, k, v = rand((2, 4, 8, 32), dtype, 1), rand((2, 4, 20, 32), dtype, 2), rand((2, 4, 20, 32), dtype, 3)
    out, lse = FIA(q, k, v, num_heads=4, input_layout="BNSD", scale=0.17, softmax_lse_flag=True)
    assert isinstance(out, np.ndarray) and isinstance(lse, np.ndarray)
    assert out.dtype == dtype and out.shape == (2, 4, 8, 32)
    assert lse.dtype == np.float32 and lse.shape == (2, 4, 8, 1)
    ref, ref_lse = reference(q, k, v, 0.17)
    tol = {np.dtype(np.float32): 1e-5, np.dtype(np.float16): 4e-3, BF16: 3e-2}[dtype]
    np.testing.assert_allclose(out.astype(np.float64), ref, atol=tol, rtol=tol)
    np.testing.assert_allclose(lse, ref_lse, atol=1e-4, rtol=1e-5)
    # Same bytes as the torch path.
    out_t, lse_t = FIA(to_torch(q), to_torch(k), to_torch(v), num_heads=4, input_layout="BNSD", scale=0.17,
                       softmax_lse_flag=True)
    assert torch.equal(to_torch(out).view(torch.int16 if dtype.itemsize == 2 else torch.int32),
                       out_t.view(torch.int16 if dtype.itemsize == 2 else torch.int32))
    assert np.array_equal(lse, lse_t.numpy())


@pytest.mark.parametrize("dtype", NP_DTYPES, ids=str)
def test_lse_placeholder_when_not_requested(dtype):
    q, k = rand((1, 2, 3, 16), dtype), rand((1, 2, 5, 16), dtype, 1)
    out, lse = FIA(q, k, k, num_heads=2, input_layout="BNSD")
    assert isinstance(lse, np.ndarray)
    assert lse.shape == (1,) and lse.dtype == np.float32 and lse[0] == 0.0
    _, lse_t = FIA(to_torch(q), to_torch(k), to_torch(k), num_heads=2, input_layout="BNSD")
    assert lse_t.shape == (1,) and lse_t.dtype == torch.float32 and lse_t.item() == 0.0


@pytest.mark.parametrize("dtype", NP_DTYPES, ids=str)
def test_query_as_transposed_view(dtype):
    q_bsnd = rand((2, 8, 4, 32), dtype, 4)  # BSND storage
    q = q_bsnd.transpose(0, 2, 1, 3)  # a BNSD view, not contiguous
    assert not q.flags.c_contiguous
    k, v = rand((2, 4, 16, 32), dtype, 5), rand((2, 4, 16, 32), dtype, 6)
    got, got_lse = FIA(q, k, v, num_heads=4, input_layout="BNSD", scale=0.2, softmax_lse_flag=True)
    want, want_lse = FIA(np.ascontiguousarray(q), k, v, num_heads=4, input_layout="BNSD", scale=0.2,
                         softmax_lse_flag=True)
    assert got.flags.c_contiguous
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)) and np.array_equal(got_lse, want_lse)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_key_strided_in_batch_and_sequence(framework):
    big_k = rand((4, 40, 2, 32), np.float16, 7)  # BSND
    big_v = rand((4, 40, 2, 32), np.float16, 8)
    k, v = big_k[::2, 3:35:2], big_v[::2, 3:35:2]  # batch step 2, sequence step 2
    q = rand((2, 6, 4, 32), np.float16, 9)
    if framework == "torch":
        k, v, q = torch.from_numpy(big_k)[::2, 3:35:2], torch.from_numpy(big_v)[::2, 3:35:2], torch.from_numpy(q)
        assert not k.is_contiguous()
    kw = dict(num_heads=4, num_key_value_heads=2, input_layout="BSND", scale=0.2)
    got, _ = FIA(q, k, v, **kw)
    cont = (lambda x: x.contiguous()) if framework == "torch" else np.ascontiguousarray
    want, _ = FIA(q, cont(k), cont(v), **kw)
    got, want = np.asarray(got), np.asarray(want)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
    # and it is the attention over the strided data
    g = np.asarray(q).astype(np.float64)
    kk = np.asarray(k).astype(np.float64).repeat(2, axis=2)
    vv = np.asarray(v).astype(np.float64).repeat(2, axis=2)
    ref, _ = reference(g.transpose(0, 2, 1, 3), kk.transpose(0, 2, 1, 3), vv.transpose(0, 2, 1, 3), 0.2)
    np.testing.assert_allclose(got.astype(np.float64), ref.transpose(0, 2, 1, 3), atol=3e-3, rtol=1e-2)


class Marked(torch.Tensor):
    """A tensor subclass: passed to the core as a numpy view, not by address."""


@pytest.mark.parametrize("dtype", NP_DTYPES, ids=str)
def test_torch_inputs_by_address_match_numpy(dtype):
    # Plain torch tensors reach the core by address, shape and strides: a view with a storage
    # offset, tensors that require grad, and a subclass give the numpy arrays' bits.
    big_q, k, v = rand((3, 4, 8, 32), dtype, 10), rand((2, 4, 16, 32), dtype, 11), rand((2, 4, 16, 32), dtype, 12)
    kw = dict(num_heads=4, input_layout="BNSD", scale=0.2, softmax_lse_flag=True)
    want, want_lse = FIA(np.ascontiguousarray(big_q[1:]), k, v, **kw)
    tq = to_torch(big_q)[1:]
    assert tq.storage_offset() > 0
    tk, tv = to_torch(k).requires_grad_(), to_torch(v).as_subclass(Marked)
    got, got_lse = FIA(tq, tk, tv, **kw)
    assert type(got) is torch.Tensor and got.dtype == tq.dtype and not got.requires_grad
    got = got.view(torch.int16).numpy() if got.dtype == torch.bfloat16 else got.numpy()
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)) and np.array_equal(got_lse.numpy(), want_lse)


@pytest.mark.parametrize("layout,qshape,kshape,out_shape,lse_shape", [
    ("BNSD", (0, 4, 8, 32), (0, 4, 16, 32), (0, 4, 8, 32), (0, 4, 8, 1)),
    ("BSH", (0, 8, 128), (0, 16, 128), (0, 8, 128), (0, 4, 8, 1)),
    ("BSND", (0, 8, 4, 32), (0, 16, 4, 32), (0, 8, 4, 32), (0, 4, 8, 1)),
])
@pytest.mark.parametrize("dtype", NP_DTYPES, ids=str)
def test_empty_batch(layout, qshape, kshape, out_shape, lse_shape, dtype):
    q, k = np.zeros(qshape, dtype), np.zeros(kshape, dtype)
    out, lse = FIA(q, k, k, num_heads=4, input_layout=layout, softmax_lse_flag=True)
    assert isinstance(out, np.ndarray) and out.shape == out_shape and out.dtype == dtype
    assert lse.shape == lse_shape and lse.dtype == np.float32
    out, lse = FIA(q, k, k, num_heads=4, input_layout=layout)
    assert out.shape == out_shape and lse.shape == (1,)


@pytest.mark.parametrize("dtype", NP_DTYPES, ids=str)
@pytest.mark.parametrize("qs", [1, 8])
def test_empty_kv_gives_zero_output_and_inf_lse(dtype, qs):
    q = rand((2, 4, qs, 32), dtype, 10)
    k = np.zeros((2, 4, 0, 32), dtype)
    out, lse = FIA(q, k, k, num_heads=4, input_layout="BNSD", softmax_lse_flag=True)
    assert out.shape == (2, 4, qs, 32) and out.dtype == dtype
    assert np.all(out.astype(np.float32) == 0.0)
    assert lse.shape == (2, 4, qs, 1) and np.all(np.isposinf(lse))
    out, lse = FIA(q, k, k, num_heads=4, input_layout="BNSD")
    assert np.all(out.astype(np.float32) == 0.0) and lse.shape == (1,) and lse[0] == 0


def test_zero_kv_length_batch_via_actual_seq_lengths_kv():
    q, k = rand((2, 2, 4, 16), np.float32, 11), rand((2, 2, 6, 16), np.float32, 12)
    out, lse = FIA(q, k, k, num_heads=2, input_layout="BNSD", softmax_lse_flag=True,
                   actual_seq_lengths_kv=np.array([6, 0]))
    assert np.all(out[1] == 0) and np.all(np.isposinf(lse[1]))
    ref, ref_lse = reference(q[:1], k[:1], k[:1], 1.0)
    np.testing.assert_allclose(out[:1], ref, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(lse[:1], ref_lse, atol=1e-4)


INT_LISTS = [
    lambda x: list(x),
    lambda x: tuple(x),
    lambda x: np.array(x, dtype=np.int64),
    lambda x: np.array(x, dtype=np.int32),
    lambda x: torch.tensor(x, dtype=torch.int64),
    lambda x: torch.tensor(x, dtype=torch.int32),
    lambda x: [np.int64(v) for v in x],
]


@pytest.mark.parametrize("form", range(len(INT_LISTS)))
@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_int_lists_as_arrays(form, framework):
    q, k = rand((2, 2, 6, 16), np.float32, 13), rand((2, 2, 9, 16), np.float32, 14)
    if framework == "torch":
        q, k = torch.from_numpy(q), torch.from_numpy(k)
    conv = INT_LISTS[form]
    kw = dict(num_heads=2, input_layout="BNSD", softmax_lse_flag=True)
    want = FIA(q, k, k, actual_seq_lengths=[6, 3], actual_seq_lengths_kv=[9, 4], **kw)
    got = FIA(q, k, k, actual_seq_lengths=conv([6, 3]), actual_seq_lengths_kv=conv([9, 4]), **kw)
    full = FIA(q, k, k, **kw)
    for g, w in zip(got, want):
        assert np.array_equal(np.asarray(g), np.asarray(w))
    assert not np.array_equal(np.asarray(got[0]), np.asarray(full[0]))  # the lengths were applied
    ref, _ = reference(np.asarray(q)[1:, :, :3], np.asarray(k)[1:, :, :4], np.asarray(k)[1:, :, :4], 1.0)
    np.testing.assert_allclose(np.asarray(got[0])[1:, :, :3], ref, atol=1e-5, rtol=1e-5)
    assert np.all(np.asarray(got[0])[1, :, 3:] == 0)  # rows beyond actual_seq_lengths are 0


def test_tnd_cumulative_lengths_as_numpy():
    q, k, v = rand((9, 2, 16), np.float16, 15), rand((12, 2, 16), np.float16, 16), rand((12, 2, 16), np.float16, 17)
    kw = dict(num_heads=2, input_layout="TND", softmax_lse_flag=True, scale=0.25)
    a = FIA(q, k, v, actual_seq_lengths=np.array([4, 9]), actual_seq_lengths_kv=np.array([5, 12]), **kw)
    b = FIA(q, k, v, actual_seq_lengths=[4, 9], actual_seq_lengths_kv=[5, 12], **kw)
    assert a[0].shape == (9, 2, 16) and a[1].shape == (9, 2, 1)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    # batch 1 = query tokens 4..8 over key tokens 5..11
    ref, _ = reference(q[4:9].swapaxes(0, 1), k[5:12].swapaxes(0, 1), v[5:12].swapaxes(0, 1), 0.25)
    np.testing.assert_allclose(a[0][4:9].astype(np.float64), ref.swapaxes(0, 1), atol=3e-3, rtol=1e-2)


def test_int_list_2d_array_rejected():
    q = rand((2, 2, 6, 16), np.float32)
    with pytest.raises(fia.InvalidArgumentError) as info:
        FIA(q, q, q, num_heads=2, input_layout="BNSD", actual_seq_lengths=np.array([[6, 3]]))
    assert info.value.parameter == "actual_seq_lengths"
