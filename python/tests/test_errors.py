"""Every error class of the fia package: the exception type, its fia class, and the torch_npu
parameter it names (``e.parameter`` and ``str(e)``)."""
import numpy as np
import pytest
import torch

import fia

FIA = fia.npu_fused_infer_attention_score
V2 = fia.npu_fused_infer_attention_score_v2


def qkv(dtype=torch.float16, b=2, n=4, kv_n=4, qs=8, kvs=16, d=64):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(b, n, qs, d, generator=g).to(dtype), torch.randn(b, kv_n, kvs, d, generator=g).to(dtype),
            torch.randn(b, kv_n, kvs, d, generator=g).to(dtype))


def raises(exc, fia_cls, parameter, fn, *words):
    with pytest.raises(exc) as info:
        fn()
    e = info.value
    assert isinstance(e, fia.FiaError)
    assert isinstance(e, fia_cls), type(e)
    assert e.parameter == parameter, (e.parameter, str(e))
    assert str(e).startswith(parameter + ": "), str(e)
    assert e.message and e.message in str(e)
    for w in words:
        assert w in str(e), (w, str(e))
    return e


def test_error_class_hierarchy():
    assert issubclass(fia.InvalidArgumentError, ValueError)
    assert issubclass(fia.DtypeError, TypeError)
    assert issubclass(fia.UnsupportedFeatureError, NotImplementedError)
    for cls in (fia.InvalidArgumentError, fia.DtypeError, fia.UnsupportedFeatureError):
        assert issubclass(cls, fia.FiaError)
    assert not issubclass(fia.InvalidArgumentError, TypeError)
    assert not issubclass(fia.DtypeError, ValueError)


# ----- ValueError / InvalidArgumentError -----

@pytest.mark.parametrize("framework", ["torch", "numpy"])
def test_num_heads_mismatch(framework):
    q, k, v = qkv()
    if framework == "numpy":
        q, k, v = q.numpy(), k.numpy(), v.numpy()
    raises(ValueError, fia.InvalidArgumentError, "num_heads",
           lambda: FIA(q, k, v, num_heads=3, input_layout="BNSD"), "3", "4")


def test_bad_input_layout():
    q, k, v = qkv()
    raises(ValueError, fia.InvalidArgumentError, "input_layout",
           lambda: FIA(q, k, v, num_heads=4, input_layout="BXYZ"), "BXYZ")


def test_num_heads_not_multiple_of_kv_heads():
    q, k, v = qkv(n=4, kv_n=3)
    raises(ValueError, fia.InvalidArgumentError, "num_key_value_heads",
           lambda: FIA(q, k, v, num_heads=4, num_key_value_heads=3, input_layout="BNSD"), "multiple")


def test_sparse_mode_out_of_range():
    q, k, v = qkv()
    raises(ValueError, fia.InvalidArgumentError, "sparse_mode",
           lambda: FIA(q, k, v, num_heads=4, input_layout="BNSD", sparse_mode=5), "5")


def test_sparse_mode_3_requires_mask():
    q, k, v = qkv()
    raises(ValueError, fia.InvalidArgumentError, "atten_mask",
           lambda: FIA(q, k, v, num_heads=4, input_layout="BNSD", sparse_mode=3))


def test_mask_too_small():
    q, k, v = qkv()
    raises(ValueError, fia.InvalidArgumentError, "atten_mask",
           lambda: FIA(q, k, v, num_heads=4, input_layout="BNSD", atten_mask=torch.zeros(3, 3, dtype=torch.bool)))


def test_actual_seq_lengths_kv_out_of_range():
    q, k, v = qkv()
    raises(ValueError, fia.InvalidArgumentError, "actual_seq_lengths_kv",
           lambda: FIA(q, k, v, num_heads=4, input_layout="BNSD", actual_seq_lengths_kv=[17, 3]), "17")


def test_actual_seq_lengths_not_int_list():
    q, k, v = qkv()
    raises(ValueError, fia.InvalidArgumentError, "actual_seq_lengths_kv",
           lambda: FIA(q.numpy(), k.numpy(), v.numpy(), num_heads=4, input_layout="BNSD",
                       actual_seq_lengths_kv=np.zeros((2, 2), dtype=np.int64)))


@pytest.mark.parametrize("case", ["v2_num_query_heads", "v2_actual_seq_kvlen", "ifa_actual_seq_lengths",
                                  "pfa_deq_scale1"])
def test_renamed_parameters_are_named_as_called(case):
    q, k, v = qkv()
    q1 = q[:, :, :1].contiguous()
    calls = {
        "v2_num_query_heads": lambda: V2(q, k, v, num_query_heads=3, input_layout="BNSD"),
        "v2_actual_seq_kvlen": lambda: V2(q, k, v, num_query_heads=4, input_layout="BNSD", actual_seq_kvlen=[17, 3]),
        "ifa_actual_seq_lengths": lambda: fia.npu_incre_flash_attention(
            q1, k, v, num_heads=4, input_layout="BNSD", actual_seq_lengths=[17, 3]),
        "pfa_deq_scale1": lambda: fia.npu_prompt_flash_attention(
            q, k, v, num_heads=4, input_layout="BNSD", deq_scale1=torch.ones(1)),
    }
    raises(ValueError, fia.InvalidArgumentError, case.split("_", 1)[1], calls[case])


def test_ifa_decode_inner_precise():
    q, k, v = qkv(qs=1)
    raises(ValueError, fia.InvalidArgumentError, "inner_precise",
           lambda: fia.npu_incre_flash_attention(q, k, v, num_heads=4, input_layout="BNSD", inner_precise=2))


def test_scale_value_alias():
    q, k, v = qkv(dtype=torch.float32)
    a, _ = FIA(q, k, v, num_heads=4, input_layout="BNSD", scale=0.125)
    b, _ = FIA(q, k, v, num_heads=4, input_layout="BNSD", scale_value=0.125)
    d, _ = FIA(q, k, v, num_heads=4, input_layout="BNSD")
    assert torch.equal(a, b)
    assert not torch.equal(a, d)


def test_scale_and_scale_value_disagree():
    q, k, v = qkv()
    raises(ValueError, fia.InvalidArgumentError, "scale_value",
           lambda: FIA(q, k, v, num_heads=4, input_layout="BNSD", scale=0.1, scale_value=0.125), "0.1", "0.125")


# ----- TypeError / DtypeError -----

def test_int32_query():
    q, k, v = qkv()
    raises(TypeError, fia.DtypeError, "query",
           lambda: FIA(q.to(torch.int32), k, v, num_heads=4, input_layout="BNSD"), "I32")


def test_float64_key_with_fp16_query():
    q, k, v = qkv()
    raises(TypeError, fia.DtypeError, "key", lambda: FIA(q, k.double(), v, num_heads=4, input_layout="BNSD"), "F64")


def test_float_mask():
    q, k, v = qkv()
    raises(TypeError, fia.DtypeError, "atten_mask",
           lambda: FIA(q, k, v, num_heads=4, input_layout="BNSD", atten_mask=torch.zeros(2, 1, 8, 16)), "BOOL")


def test_big_endian_numpy():
    q, k, v = qkv(dtype=torch.float32)
    raises(TypeError, fia.DtypeError, "query",
           lambda: FIA(q.numpy().astype(">f4"), k.numpy(), v.numpy(), num_heads=4, input_layout="BNSD"), "endian")


# ----- NotImplementedError / UnsupportedFeatureError -----

@pytest.mark.parametrize("name", ["out_dtype", "query_dtype", "key_dtype", "value_dtype"])
def test_v2_dtype_override(name):
    q, k, v = qkv()
    raises(NotImplementedError, fia.UnsupportedFeatureError, name,
           lambda: V2(q, k, v, num_query_heads=4, input_layout="BNSD", **{name: 1}))


def test_v2_dtype_override_none_is_fine():
    q, k, v = qkv(dtype=torch.float32)
    a, _ = V2(q, k, v, num_query_heads=4, input_layout="BNSD", out_dtype=None)
    b, _ = FIA(q, k, v, num_heads=4, input_layout="BNSD")
    assert torch.equal(a, b)


def test_mla_full_quant_names_query_quant_mode():
    # An INT8 query with rope is MLA full quantization (FIA-SPEC 13.3): query_quant_mode must be 3.
    q, k, v = (x.to(torch.int8) for x in qkv())
    rope = torch.zeros(*q.shape[:-1], 8, dtype=torch.bfloat16)
    raises(ValueError, fia.InvalidArgumentError, "query_quant_mode",
           lambda: FIA(q, k, v, num_heads=4, input_layout="BNSD", query_rope=rope, key_rope=rope), "13.3")


@pytest.mark.parametrize("framework", ["torch", "numpy"])
def test_innermost_axis_not_contiguous(framework):
    q, k, v = qkv(dtype=torch.float32, qs=64, kvs=64)
    if framework == "numpy":
        q, k, v = q.numpy().swapaxes(-1, -2), k.numpy(), v.numpy()
    else:
        q = q.transpose(-1, -2)
    raises(NotImplementedError, fia.UnsupportedFeatureError, "query",
           lambda: FIA(q, k, v, num_heads=4, input_layout="BNSD"), "stride")


def test_value_innermost_axis_not_contiguous():
    q, k, v = qkv(dtype=torch.float32, kvs=64)
    raises(NotImplementedError, fia.UnsupportedFeatureError, "value",
           lambda: FIA(q, k, v.transpose(-1, -2), num_heads=4, input_layout="BNSD"), "stride")


# ----- arguments that are not CPU arrays -----

def test_non_cpu_tensor_with_numpy_query():
    q, k, v = qkv()
    raises(ValueError, fia.InvalidArgumentError, "key",
           lambda: FIA(q.numpy(), k.to("meta"), v.numpy(), num_heads=4, input_layout="BNSD"), "CPU", "meta")


def test_non_cpu_tensor_named():
    from fia import _calls
    q, k, v = qkv()
    raises(ValueError, fia.InvalidArgumentError, "atten_mask",
           lambda: _calls.execute("npu_fused_infer_attention_score", q, k, v,
                                  dict(num_heads=4, input_layout="BNSD",
                                       atten_mask=torch.zeros(8, 16, dtype=torch.bool, device="meta"))), "CPU")


@pytest.mark.parametrize("kind", ["sparse", "nested"])
def test_sparse_and_nested_tensors_named(kind):
    q, k, v = qkv()
    if kind == "sparse":
        bad = k.float().to_sparse().to(torch.float16)
    else:
        bad = torch.nested.nested_tensor([k[0], k[1]], layout=torch.jagged)
    raises(ValueError, fia.InvalidArgumentError, "key",
           lambda: FIA(q, bad, v, num_heads=4, input_layout="BNSD"), "dense (strided)")


@pytest.mark.parametrize("bad", ["abc", [[1.0, 2.0]], 3.5])
def test_non_array_argument_numpy(bad):
    q, k, v = qkv()
    raises(ValueError, fia.InvalidArgumentError, "value",
           lambda: FIA(q.numpy(), k.numpy(), bad, num_heads=4, input_layout="BNSD"), "CPU tensor or array")


def test_non_array_argument_torch_names_parameter():
    # With torch tensors the call goes through the torch.ops schema, which rejects it first.
    q, k, v = qkv()
    with pytest.raises((TypeError, ValueError, RuntimeError)) as info:
        FIA(q, "abc", v, num_heads=4, input_layout="BNSD")
    assert "key" in str(info.value)
    with pytest.raises((TypeError, ValueError, RuntimeError)) as info:
        FIA(q, k, v, num_heads=4, input_layout="BNSD", atten_mask="abc")
    assert "atten_mask" in str(info.value)


def test_merge_errors_name_parameter():
    out = torch.zeros(1, 2, 3, 4)
    lse = torch.zeros(1, 2, 3, 1)
    raises(ValueError, fia.InvalidArgumentError, "input_layout",
           lambda: fia.merge_attention_states(out.numpy(), lse.numpy(), out.numpy(), lse.numpy(), "XYZ"))


@pytest.mark.parametrize("framework", ["torch", "numpy"])
@pytest.mark.parametrize("name,value", [("num_heads", "4"), ("num_heads", None), ("num_heads", 4.0),
                                        ("softmax_lse_flag", 1), ("scale", "0.1"),
                                        ("actual_seq_lengths_kv", [2.5, 3]), ("actual_seq_lengths_kv", 16)])
def test_attributes_of_the_wrong_python_type(framework, name, value):
    """ArgumentTypeError (a TypeError) names the attribute, on both paths, before anything runs."""
    q, k, v = qkv()
    if framework == "numpy":
        q, k, v = q.numpy(), k.numpy(), v.numpy()
    kwargs = {"num_heads": 4, "input_layout": "BNSD", name: value}
    raises(TypeError, fia.ArgumentTypeError, name, lambda: fia.npu_fused_infer_attention_score(q, k, v, **kwargs))
