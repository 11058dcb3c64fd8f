"""Every ../shared/cases case through the Python API (torch tensors), judged as `fia run` is
judged (FIA-SPEC 21.1 criterion A, cases/README.md), and bit-identical to the C++ API (`fia run`)
on the same inputs."""
import json
import pathlib
import subprocess

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import fia
from conftest import shared_dir
from judge import criterion_a, lse_match

DTYPE_NAMES = {torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32", torch.int8: "I8"}


def cases(*families):
    root = shared_dir() / "cases"
    found = sorted(p for f in families for p in (root / f).glob("*") if p.is_dir())
    return [pytest.param(p, id=p.name) for p in found]


def call_case(case: pathlib.Path, **extras):
    """The case as a Python call of npu_fused_infer_attention_score (CASE-FORMAT.md)."""
    params = json.loads((case / "params.json").read_text())
    tensors = load_file(str(case / "inputs.safetensors"))
    keys = [tensors.pop(f"key.{i}") for i in range(len(tensors)) if f"key.{i}" in tensors]
    values = [tensors.pop(f"value.{i}") for i in range(len(tensors)) if f"value.{i}" in tensors]
    key = keys if keys else tensors.pop("key")
    value = values if values else tensors.pop("value")
    query = tensors.pop("query")
    return fia.npu_fused_infer_attention_score(query, key, value, **tensors, **params, **extras)


@pytest.mark.parametrize("case", cases("core", "storage", "quant"))
def test_valid_case_matches_expected_and_the_cpp_api(case, cli, tmp_path):
    out, lse = call_case(case)
    expected = load_file(str(case / "expected.safetensors"))
    with open(case / "expected.safetensors", "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    want_dtype = header["__metadata__"]["out_dtype"]
    assert DTYPE_NAMES[out.dtype] == want_dtype
    assert tuple(out.shape) == tuple(expected["attention_out"].shape)
    assert criterion_a(out.float().numpy(), expected["attention_out"].numpy(), want_dtype) == ""
    assert lse_match(lse.numpy(), expected["softmax_lse"].numpy()) == ""

    run = subprocess.run([str(cli), "run", str(case), "--out", str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    cpp = load_file(str(tmp_path / "outputs.safetensors"))
    assert torch.equal(out.view(torch.uint8) if out.dtype != torch.int8 else out,
                       cpp["attention_out"].view(torch.uint8) if out.dtype != torch.int8 else cpp["attention_out"])
    assert np.array_equal(lse.numpy().view(np.uint32), cpp["softmax_lse"].numpy().view(np.uint32))


@pytest.mark.parametrize("case", cases("invalid", "invalid-quant"))
def test_invalid_case_is_rejected_naming_the_parameter(case):
    names = (case / "expected_error.txt").read_text().splitlines()[0].split("|")
    # An unknown keyword is Python's own TypeError (it names the keyword); every other rule is a
    # fia.FiaError naming the parameter.
    with pytest.raises((fia.FiaError, TypeError)) as err:
        call_case(case, strict=True)
    assert isinstance(err.value, (ValueError, TypeError)), repr(err.value)
    assert any(n in str(err.value) for n in names), f"expected one of {names} in: {err.value}"


def test_the_shared_cases_are_present():
    if not shared_dir().is_dir():
        pytest.skip(f"no shared folder at {shared_dir()}")
    assert len(cases("core", "storage", "quant")) >= 40
    assert len(cases("invalid", "invalid-quant")) >= 40
