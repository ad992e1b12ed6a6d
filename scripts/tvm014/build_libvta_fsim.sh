#!/usr/bin/env bash
# Build VTA's functional-simulator driver (libvta_fsim.so) and the TVM runtime it links
# against (libtvm_runtime.so) from TVM v0.14.0's sources - nothing else of TVM, no LLVM.
#
# Needs:
#   - a TVM v0.14.0 source tree (tag v0.14.0, commit 7315c9d5b4) with its 3rdparty/
#     submodules filled in: vta-hw = apache/tvm-vta 36a91576ed, dlpack = dmlc/dlpack
#     e2bdd3bee8, dmlc-core = dmlc/dmlc-core 09511cf9fe, rang = agauniyal/rang cabe04d6d6
#     (a `git archive` of each is enough; no .git directories are needed);
#   - g++, cmake (>= 3.18) and ninja (apt-get install g++ cmake ninja-build).
#
# Usage: scripts/tvm014/build_libvta_fsim.sh TVM_SOURCE_DIR [BUILD_DIR]
#   BUILD_DIR defaults to TVM_SOURCE_DIR/build; JOBS (default 2) sets ninja's parallelism.
# Result: BUILD_DIR/libtvm_runtime.so and BUILD_DIR/libvta_fsim.so. The simulated VTA's
# hardware is TVM_SOURCE_DIR/3rdparty/vta-hw/config/vta_config.json at build time (stock:
# 1x16_i8w8a32_15_15_18_17), copied next to the libraries: vtatune's DriverDevice reads it
# there to refuse programs of other hardware.
# About 2 minutes on two cores.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
    echo "usage: $0 TVM_SOURCE_DIR [BUILD_DIR]" >&2
    exit 2
fi
tvm=$(cd "$1" && pwd)
build=${2:-$tvm/build}
jobs=${JOBS:-2}

for need in CMakeLists.txt 3rdparty/vta-hw/config/vta_config.json \
            3rdparty/dlpack/include/dlpack/dlpack.h 3rdparty/dmlc-core/include/dmlc/logging.h \
            3rdparty/rang/include/rang.hpp; do
    if [[ ! -e $tvm/$need ]]; then
        echo "$0: $tvm/$need missing (fill in TVM's source tree and its 3rdparty/)" >&2
        exit 2
    fi
done
for tool in g++ cmake ninja; do
    command -v "$tool" >/dev/null || { echo "$0: $tool not found" >&2; exit 2; }
done

mkdir -p "$build"
# TVM's own default config, with the three settings this build needs: no LLVM (no codegen
# is built), VTA's functional simulator on, and no libbacktrace (it would be fetched).
cp "$tvm/cmake/config.cmake" "$build/config.cmake"
cat >> "$build/config.cmake" <<'CFG'
set(USE_LLVM OFF)
set(USE_VTA_FSIM ON)
set(USE_LIBBACKTRACE OFF)
CFG

cd "$build"
cmake -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="-O1 -g0 -w" "$tvm"
# Only the two libraries: the compiler library (target tvm) is what needs LLVM and 30 minutes.
ninja -j"$jobs" tvm_runtime vta_fsim
# The hardware the library simulates, where vtatune's DriverDevice looks for it.
cp "$tvm/3rdparty/vta-hw/config/vta_config.json" "$build/vta_config.json"
ls -l "$build/libtvm_runtime.so" "$build/libvta_fsim.so" "$build/vta_config.json"
