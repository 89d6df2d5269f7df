# Cross build for 64-bit ARM Linux on a Debian x86-64 host (scripts/cross-aarch64 installs what it
# needs): GCC's aarch64-linux-gnu cross compilers, multiarch arm64 libraries under
# /usr/lib/aarch64-linux-gnu (libhwy-dev:arm64, the same Highway version as the host's), header-only
# test libraries (Catch2, nlohmann-json) from the host. Tests run through qemu-aarch64, which takes
# its CPU model from QEMU_CPU and the target's loader and libraries from QEMU_LD_PREFIX.
#   cmake -S . -B build-aarch64 --toolchain cmake/toolchain-aarch64.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
# No CMAKE_FIND_ROOT_PATH: with CMAKE_LIBRARY_ARCHITECTURE set, CMake looks for libraries and
# CMake packages in /usr/lib/aarch64-linux-gnu (never the host's x86_64-linux-gnu directory) and for
# arch-independent packages in /usr/lib/cmake and /usr/share (Catch2, nlohmann-json); programs
# (python3, ninja) are the host's.
