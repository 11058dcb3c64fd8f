#!/usr/bin/env bash
# Cross builds fia for 64-bit Arm (aarch64) with Debian's cross toolchain and runs C++ tests under
# qemu-aarch64 (user mode), once per Arm Highway target the build compiles: NEON, SVE, SVE2,
# SVE_256 and SVE2_128 (README "Cross building for Arm").
#
#   scripts/cross-aarch64.sh [--full]
#
# Needs g++-aarch64-linux-gnu, qemu-user and the arm64 builds of Highway, oneTBB and GoogleTest
# (scripts/install-deps.sh --arm64). Build folder: $FIA_CROSS_BUILD (default build-aarch64);
# parallel jobs: $FIA_CROSS_JOBS (default 2).
#
# Emulation is 10-100x slower than native, so by default each target runs a subset that still
# reaches every kernel path (the subsets below); --full runs every test of the three binaries on
# every target instead (hours on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FIA_CROSS_BUILD:-build-aarch64}
jobs=${FIA_CROSS_JOBS:-2}
full=0
[ "${1:-}" = "--full" ] && full=1

for tool in aarch64-linux-gnu-g++ qemu-aarch64; do
  command -v "$tool" >/dev/null || { echo "cross-aarch64.sh: $tool not found (scripts/install-deps.sh --arm64)"; exit 1; }
done

start=$SECONDS
cmake -S . -B "$build" -G Ninja -DFIA_PYTHON=OFF -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
  --no-warn-unused-cli >/dev/null  # (the toolchain file is read by the first configure only)
cmake --build "$build" -j "$jobs" --target kernel_tests antiquant_tests validation_tests
echo "cross-aarch64.sh: built in $((SECONDS - start)) s"

# The subsets: emulation runs NEON ~10x and SVE ~100x slower than native code, so each target runs
# tests that together reach every kernel path of the cpu backend rather than every test:
#  - Compiled/PerIsa, Compiled/AntiquantPerIsa (on the target itself): random calls over every
#    query dtype (fp16, bf16, f32), KV format (float, int8, int4 antiquant), layout, mask, band,
#    pse, sink, rope, LSE, paged KV and split KV; on NEON also the head dims and KV lengths around
#    every vector, tile and chunk boundary, and every antiquant mode by storage form (the
#    antiquant random calls on NEON and SVE2_128 only, the other SVE targets take int8 and int4
#    through Cases/DequantizedEqualsFloat and Seeds/Int4EqualsInt8);
#  - Seeds/RandomSweep (all 400 on NEON, 20 elsewhere), Shapes/TileBoundary and SplitBoundary
#    (all on NEON, a few elsewhere): decode (narrow items, split KV and its merge) and prefill
#    (wide items, band and mask tiles) against the float64 reference;
#  - PostQuant*, FullQuant* (int8 output quantization; the int8 full-quant kernel and its integer
#    products), NumericsPaths (P rounding per entry point), ThreadInvariance, ForcedSchedule,
#    SoftmaxExp (the exponentials, one and several vectors at a time, against Highway's Exp),
#    Transpose (the Q panel and accumulator transposes around every block size);
#  - on NEON, Compiled/InplacePerIsa: the in-place wide kernels (16-row items: decode MLA,
#    multi-token decode), which SVE targets do not have; Compiled/WidenedKvPerIsa (prefill over
#    K/V columns kept across items);
#  - Isa.DispatchesToTheExpectedTarget: the emulated CPU reaches the target it is meant to test.
# Left out everywhere: Limits/ForcedSchedule and Workers/ConcurrentRuns (schedules and threads,
# not instruction sets; minutes each under emulation), the slow NumericsPaths on TND and
# PromptFlashAttention layouts (the same kernels with other P rules), and the per-ISA tests of
# targets other than the run's own (each has its own run).
neon_kernels='Isa.*:Compiled/PerIsa.*/NEON:Seeds/RandomSweep.*:Shapes/SplitBoundary.*:Shapes/TileBoundary.*'
neon_kernels+=':SoftmaxExp.*:Transpose.*:PostQuant*:FullQuant*:*ThreadInvariance.*:ForcedSchedule.*:NumericsPaths.IncreFlash*'
neon_kernels+=':NumericsPaths.SplitRows*:NumericsPaths.Rule*:Compiled/InplacePerIsa.*/NEON:Compiled/WidenedKvPerIsa.*/NEON'
neon_antiquant='Compiled/AntiquantPerIsa.*/NEON:Seeds/*:Cases/*:AntiquantThreadInvariance.*:PagedEquals*'
sve_kernels() {
  echo "Isa.*:Compiled/PerIsa.RandomCalls/$1:Compiled/PerIsa.DecodeRuns*/$1:Seeds/RandomSweep.CpuMatchesReference/?"\
":Seeds/RandomSweep.CpuMatchesReference/?0:Shapes/SplitBoundary.CpuMatchesReference/1[05]"\
":Shapes/TileBoundary.CpuMatchesReference/?:PostQuant.RowsAre*:PostQuant.DecodeWithout*"\
":PostQuantFormula.Simd*:FullQuantCpu.EveryStorageForm:FullQuantCpu.Fp32*:FullQuantCpu.FullyMasked*"\
":FullQuantSteps.*:FullQuantPipeline.*:ThreadInvariance.*:NumericsPaths.IncreFlash*:SoftmaxExp.*:Transpose.*"
}
# Antiquant on SVE: int8 and int4 rows of every mode against the float path and each other; the
# random calls (minutes on the wide SVE targets) on SVE2_128 only.
sve_antiquant() {
  echo "Cases/DequantizedEqualsFloat.*:Cases/CancellingOffsets.*:Seeds/Int4EqualsInt8.*/?"\
":Seeds/PagedEqualsContiguous.*/?:PagedEquals*${2:+:Compiled/AntiquantPerIsa.RandomCalls/$1}"
}

# run TARGET QEMU_CPU FIA_ISA BINARY FILTER: one test binary under emulation with that CPU, which
# must dispatch the kernels to TARGET. Writes $build/qemu-TARGET-BINARY.log and, on failure,
# $build/qemu-TARGET-BINARY.failed.
run() {
  local name=$1 cpu=$2 isa=$3 binary=$4 filter=$5 t0=$SECONDS log
  log="$build/qemu-$name-$binary"
  rm -f "$log.failed"
  [ "$full" = 1 ] && filter='*'
  if QEMU_CPU=$cpu FIA_ISA=$isa FIA_EXPECT_ISA=$name qemu-aarch64 "$build/tests/$binary" \
      --gtest_filter="$filter" >"$log.log" 2>&1; then
    echo "  $name $binary: $(grep -Eo '[0-9]+ tests? from [0-9]+ test suites? ran' "$log.log" | head -1)," \
         "$((SECONDS - t0)) s (QEMU_CPU=$cpu${isa:+ FIA_ISA=$isa})"
  else
    grep -E '^\[  FAILED|Failure|error' "$log.log" | head -n 40
    echo "  $name $binary: FAILED, $((SECONDS - t0)) s ($log.log)"
    touch "$log.failed"
  fi
}

# The emulated CPU decides the Highway target the kernels dispatch to: `max` has every Armv9
# feature (SVE2); its vector length picks among the SVE targets (SVE_256 needs 256 bits,
# SVE2_128 128 bits; 512 bits leaves SVE2); a64fx has SVE without SVE2.
target() {
  local name=$1 cpu=$2 kernels=$3 antiquant=$4
  run "$name" "$cpu" "" kernel_tests "$kernels"
  run "$name" "$cpu" "" antiquant_tests "$antiquant"
}

rm -f "$build"/qemu-*.failed
t0=$SECONDS
# Up to $jobs runs at once (each emulator is one busy thread).
throttle() { while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done; }
target NEON "max,sve=off" "$neon_kernels" "$neon_antiquant" &
throttle
run NEON "max,sve=off" "" validation_tests '*' &
throttle
target SVE "a64fx" "$(sve_kernels SVE)" "$(sve_antiquant SVE)" &
throttle
target SVE2 "max,sve512=on" "$(sve_kernels SVE2)" "$(sve_antiquant SVE2)" &
throttle
target SVE_256 "max,sve256=on" "$(sve_kernels SVE_256)" "$(sve_antiquant SVE_256)" &
throttle
target SVE2_128 "max,sve128=on" "$(sve_kernels SVE2_128)" "$(sve_antiquant SVE2_128 random)" &
wait
echo "cross-aarch64.sh: tests in $((SECONDS - t0)) s; $((SECONDS - start)) s in all"
shopt -s nullglob
failed=("$build"/qemu-*.failed)
if [ ${#failed[@]} -gt 0 ]; then
  echo "cross-aarch64.sh: failed: $(for f in "${failed[@]}"; do basename "$f" .failed | sed 's/^qemu-//'; done | tr '\n' ' ')"
  exit 1
fi
echo "cross-aarch64.sh: every test passed under qemu-aarch64"
