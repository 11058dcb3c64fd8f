#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan; fuzz/) and runs each for SECONDS (default 15).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      TARGET: params safetensors npy plan_run (default all)
#
# Build folder: $FIA_FUZZ_BUILD (default build-fuzz). Seeds: fuzz/corpus/TARGET (committed) and
# seeds made from the sample cases of $FIA_SHARED_DIR (default ../shared), when present. What a
# fuzzer learns is kept in BUILD/fuzz-corpus/TARGET and reused by the next run. Extra libFuzzer
# flags go in $FIA_FUZZ_FLAGS (e.g. "-fork=8 -ignore_crashes=1" for long runs).
# A finding is written to BUILD/fuzz-findings/TARGET-crash-<sha1> (or leak-, timeout-, oom-);
# the script goes on with the other targets and exits 1 at the end. Reproduce a finding with
#   BUILD/fuzz/fuzz_TARGET BUILD/fuzz-findings/TARGET-crash-<sha1>
# (docs/fuzzing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-15}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(params safetensors npy plan_run)
build=${FIA_FUZZ_BUILD:-build-fuzz}
shared=${FIA_SHARED_DIR:-../shared}

# On x86 the kernels are built for one Highway target, the best this CPU runs of the two the test
# build tunes (AVX3 through -march=x86-64-v4, else AVX2 through -march=x86-64-v3), as the static and
# only target: the fuzzers run the best target anyway, and an ASan build of every target took ~20
# min on 2 cores. FIA_FUZZ_ALL_TARGETS=1 builds every target, as the library itself is built.
flags=""
if [ -z "${FIA_FUZZ_ALL_TARGETS:-}" ] && grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
  march=x86-64-v3
  avx512=1
  for f in avx512f avx512bw avx512dq avx512vl avx512cd; do grep -qw "$f" /proc/cpuinfo || avx512=0; done
  [ "$avx512" = 1 ] && march=x86-64-v4
  # Highway 1.0.3's AVX2 and AVX3 targets also need AES and CLMUL, which x86-64-v3/v4 leave out:
  # without them the static target fell back to SSSE3.
  crypto=""
  grep -qw aes /proc/cpuinfo && grep -qw pclmulqdq /proc/cpuinfo && crypto="-maes -mpclmul"
  flags="-march=$march $crypto -DHWY_COMPILE_ONLY_STATIC"
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DFIA_FUZZ=ON -DFIA_BUILD_TESTS=OFF \
  -DCMAKE_CXX_FLAGS="$flags" >/dev/null
cmake --build "$build" --target fuzzers

seeds="$build/fuzz-seeds"
rm -rf "$seeds"
if [ -d "$shared/cases" ]; then
  "$build/fuzz/fuzz_seed_corpus" "$shared/cases" "$seeds"
else
  echo "fuzz.sh: no $shared/cases; running from the committed seeds only"
fi

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
failed=()
for t in "${targets[@]}"; do
  corpus="$build/fuzz-corpus/$t"
  mkdir -p "$corpus" "$build/fuzz-findings"
  dirs=("$corpus" "fuzz/corpus/$t")
  [ -d "$seeds/$t" ] && dirs+=("$seeds/$t")
  # The call decoder reads ~45 bytes before its first mutation: let plan_run inputs grow past that
  # from the start (the seeds are that long, and libFuzzer grows inputs slowly by default).
  extra=()
  [ "$t" = plan_run ] && extra=(-max_len=192 -len_control=0)
  echo "=== fuzz_$t: $seconds s"
  # shellcheck disable=SC2086  # FIA_FUZZ_FLAGS is a list of flags
  if ! "$build/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=60 -print_final_stats=1 \
      -artifact_prefix="$build/fuzz-findings/$t-" "${extra[@]}" ${FIA_FUZZ_FLAGS:-} "${dirs[@]}" 2>"$build/fuzz-$t.log"; then
    tail -n 60 "$build/fuzz-$t.log"
    failed+=("$t")
  fi
  grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "$build/fuzz-$t.log" || true
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: findings in: ${failed[*]} (inputs in $build/fuzz-findings/, logs in $build/fuzz-TARGET.log)"
  exit 1
fi
echo "fuzz.sh: no findings"
