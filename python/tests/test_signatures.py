"""Keyword and default parity with torch_npu: each function's parameters are those of torch_npu's
schema (op-plugin op_plugin_functions.yaml, master; FIA-SPEC 2.1), in order, with the same
defaults, only query/key/value positional; fia's additions are the listed extras only."""
import inspect
import re

import pytest
import torch

import fia
import fia.torch_npu

# torch_npu's schemas, copied from op-plugin's op_plugin_functions.yaml (master, 2026-08).
TORCH_NPU = {
    "npu_fused_infer_attention_score": "Tensor query, Tensor key, Tensor value, *, Tensor? pse_shift=None, Tensor? atten_mask=None, SymInt[]? actual_seq_lengths=None, SymInt[]? actual_seq_lengths_kv=None, Tensor? dequant_scale1=None, Tensor? quant_scale1=None, Tensor? dequant_scale2=None, Tensor? quant_scale2=None, Tensor? quant_offset2=None, Tensor? antiquant_scale=None, Tensor? antiquant_offset=None, Tensor? key_antiquant_scale=None, Tensor? key_antiquant_offset=None, Tensor? value_antiquant_scale=None, Tensor? value_antiquant_offset=None, Tensor? block_table=None, Tensor? query_padding_size=None, Tensor? kv_padding_size=None, Tensor? key_shared_prefix=None, Tensor? value_shared_prefix=None, SymInt[]? actual_shared_prefix_len=None, Tensor? query_rope=None, Tensor? key_rope=None, Tensor? key_rope_antiquant_scale=None, int num_heads=1, float scale=1.0, int pre_tokens=2147483647, int next_tokens=2147483647, str input_layout=\"BSH\", int num_key_value_heads=0, int sparse_mode=0, int inner_precise=0, int block_size=0, int antiquant_mode=0, int key_antiquant_mode=0, int value_antiquant_mode=0, bool softmax_lse_flag=False",  # noqa: E501
    "npu_fused_infer_attention_score_v2": "Tensor query, Tensor key, Tensor value, *, Tensor? query_rope=None, Tensor? key_rope=None, Tensor? pse_shift=None, Tensor? atten_mask=None, SymInt[]? actual_seq_qlen=None, SymInt[]? actual_seq_kvlen=None, Tensor? block_table=None, Tensor? dequant_scale_query=None, Tensor? dequant_scale_key=None, Tensor? dequant_offset_key=None, Tensor? dequant_scale_value=None, Tensor? dequant_offset_value=None, Tensor? dequant_scale_key_rope=None, Tensor? quant_scale_out=None, Tensor? quant_offset_out=None, Tensor? quant_scale_p=None, Tensor? learnable_sink=None, int num_query_heads=1, int num_key_value_heads=0, float softmax_scale=1.0, int pre_tokens=2147483647, int next_tokens=2147483647, str input_layout=\"BSH\", int sparse_mode=0, int block_size=0, int query_quant_mode=0, int key_quant_mode=0, int value_quant_mode=0, int inner_precise=0, bool return_softmax_lse=False, int? query_dtype=None, int? key_dtype=None, int? value_dtype=None, int? query_rope_dtype=None, int? key_rope_dtype=None, int? key_shared_prefix_dtype=None, int? value_shared_prefix_dtype=None, int? dequant_scale_query_dtype=None, int? dequant_scale_key_dtype=None, int? dequant_scale_value_dtype=None, int? dequant_scale_key_rope_dtype=None, int? out_dtype=None",  # noqa: E501
    "npu_incre_flash_attention": "Tensor query, Tensor key, Tensor value, *, Tensor? padding_mask=None, Tensor? atten_mask=None, Tensor? pse_shift=None, SymInt[]? actual_seq_lengths=None, Tensor? antiquant_scale=None, Tensor? antiquant_offset=None, Tensor? block_table=None, Tensor? dequant_scale1=None, Tensor? quant_scale1=None, Tensor? dequant_scale2=None, Tensor? quant_scale2=None, Tensor? quant_offset2=None, Tensor? kv_padding_size=None, int num_heads=1, float scale_value=1.0, str input_layout=\"BSH\", int num_key_value_heads=0, int block_size=0, int inner_precise=1",  # noqa: E501
    "npu_prompt_flash_attention": "Tensor query, Tensor key, Tensor value, *, Tensor? padding_mask=None, Tensor? atten_mask=None, Tensor? pse_shift=None, int[]? actual_seq_lengths=None, Tensor? deq_scale1=None, Tensor? quant_scale1=None, Tensor? deq_scale2=None, Tensor? quant_scale2=None, Tensor? quant_offset2=None, int num_heads=1, float scale_value=1.0, int pre_tokens=2147483647, int next_tokens=0, str input_layout=\"BSH\", int num_key_value_heads=0, int[]? actual_seq_lengths_kv=None, int sparse_mode=0",  # noqa: E501
}
# What fia adds, keyword-only: how it runs, v1's old spelling of scale, and V4's inputs in v1.
EXTRAS = {"backend": "default", "strict": False, "threads": 0, "post_quant_rounding": "device"}
V1_EXTRAS = {"scale_value": None, "dequant_scale_query": None, "learnable_sink": None, "query_quant_mode": 0}


def parse(schema: str):
    """[(name, default or inspect.Parameter.empty, keyword_only)] of a torch schema's arguments."""
    params, keyword_only = [], False
    for item in schema.split(", "):
        if item == "*":
            keyword_only = True
            continue
        m = re.fullmatch(r"(\S+) (\w+)(?:=(.*))?", item)
        kind, name, default = m.groups()
        if default is None:
            value = inspect.Parameter.empty
        elif default == "None":
            value = None
        elif default in ("True", "False"):
            value = default == "True"
        elif default.startswith('"'):
            value = default.strip('"')
        else:
            value = float(default) if kind == "float" else int(default)
        params.append((name, value, keyword_only))
    return params


@pytest.mark.parametrize("name", sorted(TORCH_NPU))
def test_python_signature_is_torch_npus(name):
    sig = inspect.signature(getattr(fia, name))
    ours = [(p.name, p.default, p.kind == p.KEYWORD_ONLY) for p in sig.parameters.values()]
    theirs = parse(TORCH_NPU[name])
    extras = dict(EXTRAS, **(V1_EXTRAS if name == "npu_fused_infer_attention_score" else {}))
    assert [p for p in ours if p[0] not in extras] == theirs
    for p in ours:
        if p[0] in extras:
            assert p[1] == extras[p[0]] and p[2], p
    assert getattr(fia.torch_npu, name) is getattr(fia, name)


@pytest.mark.parametrize("name", sorted(TORCH_NPU))
def test_torch_op_schema_is_torch_npus(name):
    schema = getattr(torch.ops.fia, name).default._schema
    args = [(a.name, a.default_value if a.has_default_value() else inspect.Parameter.empty, a.kwarg_only)
            for a in schema.arguments]
    extras = dict(EXTRAS, **(V1_EXTRAS if name == "npu_fused_infer_attention_score" else {}))
    assert [a for a in args if a[0] not in extras] == parse(TORCH_NPU[name])
    assert {a[0] for a in args if a[0] in extras} == set(extras) - {"scale_value"}
    assert [str(a.type) for a in schema.arguments[1:3]] == ["List[Tensor]", "List[Tensor]"]


def test_defaults_are_used_when_omitted():
    """Calling with only the positional arguments equals spelling out torch_npu's defaults."""
    torch.manual_seed(1)
    q, k, v = torch.randn(1, 3, 16), torch.randn(1, 7, 16), torch.randn(1, 7, 16)
    q, k, v = q.half(), k.half(), v.half()
    out, lse = fia.npu_fused_infer_attention_score(q, k, v)
    spelled = dict((n, d) for n, d, _ in parse(TORCH_NPU["npu_fused_infer_attention_score"])[3:])
    out2, lse2 = fia.npu_fused_infer_attention_score(q, k, v, **spelled)
    assert torch.equal(out, out2) and lse.tolist() == [0.0] and torch.equal(lse, lse2)
    # PFA's default next_tokens=0 has no effect without a mask in sparse_mode 0 (FIA-SPEC 6.4), and
    # PFA rounds P as FIA does on BSH (25.3): the same bits.
    assert torch.equal(fia.npu_prompt_flash_attention(q, k, v), out)
    # IFA's default inner_precise=1 and its own P rounding (25.3) stay within criterion A of FIA.
    ifa = fia.npu_incre_flash_attention(q[:, :1], k, v)
    assert torch.allclose(ifa.float(), out[:, :1].float(), atol=2.5e-5, rtol=0.005)
