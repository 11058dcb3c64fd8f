#!/usr/bin/env bash
# ThreadSanitizer run of the kernel and determinism tests (tests/kernels/*: the kernel_tests and
# antiquant_tests binaries), built with -DFIA_TSAN=ON in $FIA_TSAN_BUILD (default build-tsan).
#
#   scripts/tsan.sh [GTEST_FILTER]        (default: every test of both binaries)
#
# Debian's oneTBB is not instrumented: TSan cannot see its task spawns and joins and reports a
# race at nearly every task boundary (docs/fuzzing.md). So this first builds oneTBB itself, the
# version of the installed headers, with TBB_SANITIZE=thread, from $FIA_ONETBB_SRC or else a
# shallow clone of https://github.com/oneapi-src/oneTBB (needs git and the network), and links the
# tests against it. Any TSan report fails the run (halt_on_error). ~10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
filter=${1:-*}
build=${FIA_TSAN_BUILD:-build-tsan}
mkdir -p "$build"
build=$(cd "$build" && pwd)

version=$(awk '/#define TBB_VERSION_(MAJOR|MINOR|PATCH) /{v = v (v ? "." : "") $3} END {print v}' \
  /usr/include/oneapi/tbb/version.h)
tbb_src=${FIA_ONETBB_SRC:-$build/onetbb-src}
tbb=$build/onetbb
if [ ! -f "$tbb/lib/libtbb.so" ]; then
  if [ ! -f "$tbb_src/CMakeLists.txt" ]; then
    git clone --quiet --depth 1 --branch "v$version" https://github.com/oneapi-src/oneTBB "$tbb_src"
  fi
  # TBB_STRICT=OFF: GCC warns that TSan does not model oneTBB's atomic_thread_fence (-Wtsan).
  cmake -S "$tbb_src" -B "$build/onetbb-build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTBB_SANITIZE=thread \
    -DTBB_STRICT=OFF -DTBB_TEST=OFF -DTBB_EXAMPLES=OFF -DTBBMALLOC_BUILD=OFF -DCMAKE_INSTALL_PREFIX="$tbb" >/dev/null
  cmake --build "$build/onetbb-build"
  cmake --install "$build/onetbb-build" >/dev/null
fi

cmake -S . -B "$build" -G Ninja -DFIA_TSAN=ON -DCMAKE_PREFIX_PATH="$tbb" >/dev/null
cmake --build "$build" --target kernel_tests antiquant_tests
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
for t in kernel_tests antiquant_tests; do
  if ! ldd "$build/tests/$t" | grep "$tbb/lib/libtbb" >/dev/null; then  # not -q: ldd would get SIGPIPE
    echo "tsan.sh: $t is not linked against the instrumented oneTBB in $tbb" >&2
    exit 1
  fi
  echo "=== $t under ThreadSanitizer"
  "$build/tests/$t" --gtest_filter="$filter" --gtest_brief=1
done
echo "tsan.sh: no ThreadSanitizer reports"
