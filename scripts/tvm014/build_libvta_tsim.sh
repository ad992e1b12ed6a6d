#!/usr/bin/env bash
# Build VTA's tsim driver (libvta_tsim.so: VTA's C driver API over a verilated RTL, plus
# TVM's VTA runtime) and the TVM runtime it links against (libtvm_runtime.so) from TVM
# v0.14.0's sources, with today's Verilator (Debian's 5.006). The RTL itself is a second
# library, libvta_hw.so: scripts/tvm014/build_libvta_hw.sh.
#
# Needs what build_libvta_fsim.sh needs (TVM v0.14.0's tree with its 3rdparty/, g++, cmake,
# ninja) and Verilator's headers (apt-get install verilator).
#
# What v0.14 as pinned does not build or load with Verilator 5, fixed in the vta-hw tree
# (3rdparty/vta-hw/src/dpi/module.cc; each edit is skipped when already made):
#   - DPIModule::GetFunction takes `const std::string&` and is `final`: it no longer
#     overrides v0.14's ModuleNode::GetFunction(const String&), and does not compile;
#   - Verilator 5's runtime needs verilated_threads.cpp beside verilated.cpp (module.cc
#     includes the latter): without it the library fails to load (undefined symbol
#     ... VlThreadPool).
#
# Usage: scripts/tvm014/build_libvta_tsim.sh TVM_SOURCE_DIR [BUILD_DIR]
#   BUILD_DIR defaults to TVM_SOURCE_DIR/build (the fsim build's: the runtime is shared, and
#   only the driver is compiled when it is there); JOBS (default 2) sets ninja's parallelism.
# Result: BUILD_DIR/libtvm_runtime.so, BUILD_DIR/libvta_tsim.so and the vta-hw tree's
# vta_config.json next to them.
set -euo pipefail

. "$(dirname "$0")/_libvta_build.sh"
libvta_args "$@"
libvta_require 3rdparty/vta-hw/src/dpi/module.cc 3rdparty/vta-hw/src/tsim/tsim_driver.cc \
    -- verilator perl
inc=${VERILATOR_INC_DIR:-/usr/share/verilator/include}
if [[ ! -e $inc/verilated_threads.cpp ]]; then
    echo "$0: no Verilator headers in $inc (set VERILATOR_INC_DIR)" >&2
    exit 2
fi

module=$tvm/3rdparty/vta-hw/src/dpi/module.cc
perl -0pi -e 's/(PackedFunc GetFunction\(\s*)const std::string& name/${1}const String& name/' \
    "$module"
if ! grep -q '^#include "verilated_threads.cpp"' "$module"; then
    perl -0pi -e 's/(#include "verilated_dpi.cpp"\n)/$1#include "verilated_threads.cpp"\n/' \
        "$module"
fi
grep -q 'const String& name' "$module" && grep -q '"verilated_threads.cpp"' "$module" || {
    echo "$0: could not apply the Verilator 5 fixes to $module" >&2; exit 1; }

# build_libvta_fsim.sh's settings, and the tsim driver: one build directory serves both.
export VERILATOR_INC_DIR=$inc
libvta_build vta_tsim "set(USE_VTA_TSIM ON)"
