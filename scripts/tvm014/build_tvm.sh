#!/usr/bin/env bash
# Build TVM v0.14.0, the last TVM release with VTA, with LLVM and VTA's functional simulator
# (fsim): what the TVM v0.14 path of docs/tvm014.md needs to compile a model with a log that
# `python -m vtatune export` wrote, run it on fsim, and send it to a board over RPC.
#
#   scripts/tvm014/build_tvm.sh [DIR]      # default DIR: ./tvm-v0.14.0
#
# DIR is cloned (tag v0.14.0 and the four submodules a VTA build reads) unless it already holds
# a checkout of that tag; the build goes to DIR/build. Environment:
#   JOBS         parallel compile jobs (default: the number of CPUs)
#   LLVM_CONFIG  llvm-config of LLVM 14, the LLVM TVM v0.14 was released against
#                (default: llvm-config-14 on the PATH, else /usr/lib/llvm-14/bin/llvm-config)
#   OPT          the compiler's optimisation flag (default -O2; -O0 compiles faster and
#                runs fsim slower)
# Needs git, cmake, ninja, a C++17 compiler, python3 and LLVM 14's development files
# (Debian/Ubuntu: apt-get install git g++ cmake ninja-build python3-venv llvm-14-dev).
# It ends by importing the build from Python and printing the variables to export.
set -euo pipefail

DIR=$(realpath -m "${1:-tvm-v0.14.0}")
JOBS=${JOBS:-$(nproc)}
OPT=${OPT:--O2}
TAG=v0.14.0
# The commits the tag pins (checked below, so that a moved tag or a stale checkout is seen).
TVM_COMMIT=7315c9d5b4
declare -A SUBMODULES=(
  [3rdparty/vta-hw]=36a91576ed      # apache/tvm-vta: VTA's hardware headers, fsim, config
  [3rdparty/dlpack]=e2bdd3bee8
  [3rdparty/dmlc-core]=09511cf9fe
  [3rdparty/rang]=cabe04d6d6
)

fail() { echo "build_tvm.sh: error: $*" >&2; exit 2; }

for tool in git cmake ninja python3; do
  command -v "$tool" > /dev/null || fail "$tool not found (see the requirements at the top)"
done
LLVM_CONFIG=${LLVM_CONFIG:-$(command -v llvm-config-14 || echo /usr/lib/llvm-14/bin/llvm-config)}
[ -x "$LLVM_CONFIG" ] || fail "no llvm-config at $LLVM_CONFIG (install llvm-14-dev or set LLVM_CONFIG)"
case $("$LLVM_CONFIG" --version) in
  14.*) ;;
  *) echo "build_tvm.sh: warning: LLVM $("$LLVM_CONFIG" --version), not 14 (untried)" >&2 ;;
esac

# 1. Sources: the tag, and only the submodules the targets below compile against.
if [ ! -e "$DIR" ]; then
  git clone --quiet --depth 1 --branch "$TAG" https://github.com/apache/tvm "$DIR"
fi
[ -d "$DIR/.git" ] || fail "$DIR exists and is no git checkout"
head=$(git -C "$DIR" rev-parse --short=10 HEAD)
[ "$head" = "$TVM_COMMIT" ] || fail "$DIR is at $head, not $TAG ($TVM_COMMIT)"
git -C "$DIR" submodule --quiet update --init "${!SUBMODULES[@]}"
for path in "${!SUBMODULES[@]}"; do
  got=$(git -C "$DIR/$path" rev-parse --short=10 HEAD)
  [ "$got" = "${SUBMODULES[$path]}" ] || fail "$path is at $got, $TAG pins ${SUBMODULES[$path]}"
done

# 2. Configuration: TVM's defaults (they include the RPC runtime a board needs) plus LLVM and
# fsim; no libbacktrace (it is downloaded and built otherwise) and no C++ unit tests.
mkdir -p "$DIR/build"
cp "$DIR/cmake/config.cmake" "$DIR/build/config.cmake"
cat >> "$DIR/build/config.cmake" <<EOF
set(USE_LLVM $LLVM_CONFIG)
set(USE_VTA_FSIM ON)
set(USE_LIBBACKTRACE OFF)
set(USE_GTEST OFF)
EOF

# 3. The compiler library, the runtime and fsim (libvta_fsim.so) only: the targets VTA's Python
# package loads. No CMAKE_BUILD_TYPE: the flags are OPT's alone.
cmake -S "$DIR" -B "$DIR/build" -G Ninja \
  -DCMAKE_CXX_FLAGS="$OPT -g0 -w" -DCMAKE_C_FLAGS="$OPT -g0 -w" > "$DIR/build/cmake.log"
nice -n 10 ninja -C "$DIR/build" -j "$JOBS" tvm tvm_runtime vta_fsim

# 4. A second VTA_HW_PATH whose vta_config.json says TARGET "pynq" (the same 1x16 hardware),
# for scripts/tvm014/deploy.py --target pynq and for a host that drives a Pynq board: the
# configuration is copied, the rest of vta-hw linked.
PYNQ_HW="$DIR/build/vta-hw-pynq"
rm -rf "$PYNQ_HW" && mkdir -p "$PYNQ_HW"
for entry in "$DIR/3rdparty/vta-hw"/*; do
  [ "$(basename "$entry")" = config ] || ln -s "$entry" "$PYNQ_HW/"
done
cp -r "$DIR/3rdparty/vta-hw/config" "$PYNQ_HW/config"
python3 - "$PYNQ_HW/config/vta_config.json" <<'EOF'
import json, sys
path = sys.argv[1]
config = json.load(open(path))
config["TARGET"] = "pynq"
json.dump(config, open(path, "w"), indent=2)
EOF

# 5. What a Python session needs, and a first import (it needs numpy<2 and TVM's other Python
# dependencies: docs/tvm014.md, "Building TVM v0.14 with VTA").
cat <<EOF
Built TVM $TAG with VTA fsim in $DIR/build. For Python:
export TVM_HOME=$DIR
export PYTHONPATH=$DIR/python:$DIR/vta/python
export TVM_LIBRARY_PATH=$DIR/build
export VTA_HW_PATH=$DIR/3rdparty/vta-hw              # TARGET sim: runs on fsim
export VTA_HW_PATH_PYNQ=$PYNQ_HW   # TARGET pynq (VTA_HW_PATH=\$VTA_HW_PATH_PYNQ for a board)
EOF
if PYTHONPATH="$DIR/python:$DIR/vta/python" TVM_LIBRARY_PATH="$DIR/build" \
   VTA_HW_PATH="$DIR/3rdparty/vta-hw" python3 -c \
   "import tvm, vta, vta.testing.simulator; print('import check: TVM', tvm.__version__, 'VTA', vta.get_env().TARGET, vta.get_env().MODEL)"; then
  :
else
  echo "build_tvm.sh: the build is done, but python3 cannot import it yet (its Python" \
       "dependencies: docs/tvm014.md)" >&2
fi
