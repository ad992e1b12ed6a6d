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

. "$(dirname "$0")/_libvta_build.sh"
libvta_args "$@"
libvta_require
libvta_build vta_fsim
