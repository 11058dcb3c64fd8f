"""Shared fixtures of the Python tests: the shared case folders and the fia CLI (for comparing
with the C++ API). The shared folder comes from FIA_SHARED_DIR or the repository's sibling
../shared (README: how to get it); the CLI from FIA_CLI or build/fia."""
import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def shared_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("FIA_SHARED_DIR", REPO.parent / "shared"))


def fia_cli() -> pathlib.Path:
    return pathlib.Path(os.environ.get("FIA_CLI", REPO / "build" / "fia"))


@pytest.fixture(scope="session")
def cli() -> pathlib.Path:
    path = fia_cli()
    if not path.exists():
        pytest.skip(f"the fia CLI is not built at {path} (set FIA_CLI)")
    return path
