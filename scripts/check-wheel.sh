#!/usr/bin/env bash
# `pip install .` as a user does it (docs/python.md): builds the wheel in a fresh virtual
# environment (build isolation: scikit-build-core and nanobind from PyPI), then runs the Python
# example from outside the checkout against the installed package. torch and numpy come from the
# system site-packages so that the check does not download them again.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install -q .
cd "$venv"
"$venv/bin/python" -c "import fia, pathlib; assert pathlib.Path(fia.__file__).is_relative_to('$venv'), fia.__file__; print('installed fia', fia.__version__, 'at', fia.__file__)"
"$venv/bin/python" "$OLDPWD/examples/python/paged_decode.py"
