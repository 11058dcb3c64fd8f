#!/usr/bin/env bash
# Installs fia's build and test dependencies from Debian packages (Debian 12 "bookworm").
#
#   scripts/install-deps.sh [--arm64]
#
# --arm64 also installs what scripts/cross-aarch64.sh needs: the aarch64 cross compiler, qemu's
# user-mode emulator, and (through Debian multiarch: dpkg --add-architecture arm64) the arm64
# builds of Highway, oneTBB and GoogleTest.
set -euo pipefail
arm64=0
[ "${1:-}" = "--arm64" ] && arm64=1
# clang and libclang-rt-dev (libFuzzer and the sanitizer runtimes): the fuzzers of scripts/fuzz.sh;
# python3-dev/-venv/-pip: the Python package (docs/python.md).
packages=(g++ cmake ninja-build libtbb-dev nlohmann-json3-dev libcli11-dev libhwy-dev libgtest-dev libgmock-dev
          libbenchmark-dev pkg-config clang libclang-rt-dev python3-dev python3-venv python3-pip)
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
if [ "$arm64" = 1 ]; then
  packages+=(g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64 libtbb-dev:arm64 libgtest-dev:arm64)
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $sudo dpkg --add-architecture arm64  # apt-get update below: some arm64 package is missing
  fi
fi
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
# The Python package's build and tests (python/requirements-test.txt: nanobind, scikit-build-core,
# numpy, ml_dtypes, torch, safetensors, pytest), for the Python 3 on PATH.
requirements="$(dirname "$0")/../python/requirements-test.txt"
python3 -m pip install -q -r "$requirements" 2>/dev/null ||
  python3 -m pip install -q --break-system-packages -r "$requirements"
