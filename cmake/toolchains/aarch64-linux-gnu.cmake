# Cross build for 64-bit Arm Linux with Debian's cross toolchain (g++-aarch64-linux-gnu) and the
# arm64 builds of the dependencies installed through multiarch (libhwy-dev:arm64, libtbb-dev:arm64,
# libgtest-dev:arm64; scripts/cross-aarch64.sh). Test binaries run under qemu-aarch64 (user mode).
#
#   cmake -S . -B build-aarch64 -G Ninja -DFIA_PYTHON=OFF \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
#
# The compilers can be overridden with -DFIA_CROSS_PREFIX=... (default aarch64-linux-gnu-).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(FIA_CROSS_PREFIX "aarch64-linux-gnu-" CACHE STRING "Prefix of the cross compilers")
set(CMAKE_C_COMPILER ${FIA_CROSS_PREFIX}gcc)
set(CMAKE_CXX_COMPILER ${FIA_CROSS_PREFIX}g++)
# gcc notes on aarch64 that passing std::pair<float, float> changed in GCC 10.1 (-Wpsabi): the
# whole build is made by one compiler, so no ABI is crossed.
set(CMAKE_CXX_FLAGS_INIT "-Wno-psabi")
# Debian multiarch: the arm64 libraries and their CMake packages are in /usr/lib/aarch64-linux-gnu,
# their headers in /usr/include (shared) and /usr/include/aarch64-linux-gnu.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# Test binaries (gtest_discover_tests, ctest) run under user-mode emulation; QEMU_CPU (e.g.
# "max,sve=off" or "max,sve256=on") chooses the emulated CPU and so the Highway target. They run
# on the multiarch arm64 C library (libc6:arm64, /lib/ld-linux-aarch64.so.1), the one the arm64
# libraries were built with: not with -L /usr/aarch64-linux-gnu, whose loader comes from the cross
# toolchain's libc6-arm64-cross and need not be the same build as libc.so.6 (a mismatch hangs in
# pthread_create).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
