# What build_libvta_fsim.sh and build_libvta_tsim.sh share, sourced by both (after their
# `set -euo pipefail`): the arguments, the checks of the source tree and the tools, TVM's
# config with the settings both builds need, and the build of the TVM runtime beside the
# driver library. Not a command of its own.

# libvta_args "$@": TVM_SOURCE_DIR [BUILD_DIR] -> $tvm, $build (default $tvm/build) and $jobs
# (JOBS, default 2: ninja's parallelism).
libvta_args() {
    if [[ $# -lt 1 || $# -gt 2 ]]; then
        echo "usage: $0 TVM_SOURCE_DIR [BUILD_DIR]" >&2
        exit 2
    fi
    tvm=$(cd "$1" && pwd)
    build=${2:-$tvm/build}
    jobs=${JOBS:-2}
}

# libvta_require FILE... -- TOOL...: exit 2 naming the first source file (under $tvm) or tool
# missing; the files and tools every libvta build needs are checked too.
libvta_require() {
    local files=(CMakeLists.txt 3rdparty/vta-hw/config/vta_config.json
                 3rdparty/dlpack/include/dlpack/dlpack.h
                 3rdparty/dmlc-core/include/dmlc/logging.h 3rdparty/rang/include/rang.hpp)
    local tools=(g++ cmake ninja)
    while [[ $# -gt 0 && $1 != -- ]]; do files+=("$1"); shift; done
    [[ $# -gt 0 ]] && shift
    tools+=("$@")
    local need tool
    for need in "${files[@]}"; do
        if [[ ! -e $tvm/$need ]]; then
            echo "$0: $tvm/$need missing (fill in TVM's source tree and its 3rdparty/)" >&2
            exit 2
        fi
    done
    for tool in "${tools[@]}"; do
        command -v "$tool" >/dev/null || { echo "$0: $tool not found" >&2; exit 2; }
    done
}

# libvta_build TARGET [CMAKE SETTING...]: TVM's own default config with the settings every
# libvta build needs -- no LLVM (no codegen is built), VTA's functional simulator on, no
# libbacktrace (it would be fetched) -- and the SETTINGs given, then only the TVM runtime and
# TARGET compiled (the compiler library, target tvm, is what needs LLVM and 30 minutes).
# The hardware the library simulates is copied next to it, where vtatune's DriverDevice
# looks for it.
libvta_build() {
    local target=$1 setting
    shift
    mkdir -p "$build"
    cp "$tvm/cmake/config.cmake" "$build/config.cmake"
    for setting in "set(USE_LLVM OFF)" "set(USE_VTA_FSIM ON)" "set(USE_LIBBACKTRACE OFF)" "$@"; do
        echo "$setting" >> "$build/config.cmake"
    done
    cd "$build"
    cmake -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="-O1 -g0 -w" "$tvm"
    ninja -j"$jobs" tvm_runtime "$target"
    cp "$tvm/3rdparty/vta-hw/config/vta_config.json" "$build/vta_config.json"
    ls -l "$build/libtvm_runtime.so" "$build/lib$target.so" "$build/vta_config.json"
}
