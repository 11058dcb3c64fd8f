#!/usr/bin/env bash
# Installs fia's build and test dependencies from Debian packages (Debian 12 "bookworm").
set -euo pipefail
# clang and libclang-rt-dev (libFuzzer and the sanitizer runtimes): the fuzzers of scripts/fuzz.sh.
packages=(g++ cmake ninja-build libtbb-dev nlohmann-json3-dev libcli11-dev libhwy-dev libgtest-dev libgmock-dev
          libbenchmark-dev pkg-config clang libclang-rt-dev)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
