#!/usr/bin/env bash
# A bundle's CPU part cross-compiled for Ultra96's CPU (deploy --cpu-target ultra96) run on
# AArch64, emulated: TVM 0.27's runtime from its aarch64 wheels runs the AArch64 cpu.so under
# qemu-aarch64, and this machine's runtime the same model's x86-64 cpu.so, both from C++
# (run_cpu_part.cc: the offloaded regions replaced by the same stand-in); the two outputs
# must be byte for byte the same. No board and no VTA: the CPU's part only.
#
# Needs: apt-get install g++ g++-aarch64-linux-gnu qemu-user; pip download (the network or
# a package index) for TVM's aarch64 wheels; vtatune with the tvm extra.
# Usage: scripts/board/cpu_part_under_qemu.sh [WORK_DIR]   (default: a new temporary one)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
WORK="${1:-$(mktemp -d)}"
mkdir -p "$WORK" && cd "$WORK"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
SITE="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
FFI_VERSION="$(python -c 'import importlib.metadata as m; print(m.version("apache-tvm-ffi"))')"

# TVM 0.27's runtime for AArch64: libtvm_runtime.so and libtvm_ffi.so from the wheels
python -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_aarch64 \
    --python-version 3.11 -d wheels "apache-tvm==0.27.0.post1" "apache-tvm-ffi==$FFI_VERSION"
unzip -q -o wheels/apache_tvm-0.27.0.post1-*aarch64*.whl 'tvm/lib/libtvm_runtime.so' -d arm64
unzip -q -o wheels/apache_tvm_ffi-*aarch64*.whl 'tvm_ffi/lib/libtvm_ffi.so' 'tvm_ffi/include/*' -d arm64

# the models (the deploy tests' small ones: on the CPU a quantize and a dequantize, a global
# average pooling, a depthwise conv that VTA does not run), quantized
python - <<'PY'
import numpy as np
import onnx

from vtatune.deploy import models, quantize

rng = np.random.default_rng(0)
for name, model, shape in (("mlp", models.mlp(), (1, 64)),
                           ("classifier", models.classifier(), (1, 3, 8, 8)),
                           ("grouped", models.grouped_conv(32, groups=32), (1, 32, 8, 8))):
    samples = rng.standard_normal((4, *shape)).astype(np.float32)
    onnx.save(quantize(model, samples), f"{name}_int8.onnx")
    print(name, "x".join(map(str, shape)), file=open(f"{name}.shape", "w"))
PY
symbols() { python -c "import json, sys; print(','.join(r['symbol'] for r in json.load(open(sys.argv[1] + '/manifest.json'))['regions']))" "$1"; }

g++ -std=c++17 -O1 -I "$SITE/tvm_ffi/include" -I "$SITE/tvm_ffi/include/dlpack" \
    "$HERE/run_cpu_part.cc" -o run_x86_64 -L "$SITE/tvm_ffi/lib" -L "$SITE/tvm/lib" \
    -Wl,--no-as-needed -ltvm_runtime -ltvm_ffi -Wl,-rpath,"$SITE/tvm_ffi/lib:$SITE/tvm/lib"
aarch64-linux-gnu-g++ -std=c++17 -O1 -I arm64/tvm_ffi/include -I arm64/tvm_ffi/include/dlpack \
    "$HERE/run_cpu_part.cc" -o run_aarch64 -L arm64/tvm_ffi/lib -L arm64/tvm/lib \
    -Wl,--no-as-needed -ltvm_runtime -ltvm_ffi -Wl,-rpath-link,arm64/tvm_ffi/lib

status=0
for name in mlp classifier grouped; do
    shape="$(cut -d' ' -f2 "$name.shape")"
    python -m vtatune deploy "${name}_int8.onnx" --save "$name-host.bundle" --output /dev/null \
        >/dev/null 2>&1
    python -m vtatune deploy "${name}_int8.onnx" --cpu-target ultra96 \
        --save "$name-ultra96.bundle" >/dev/null 2>&1
    ./run_x86_64 "$name-host.bundle/cpu.so" "$(symbols "$name-host.bundle")" "$shape" \
        > "$name.x86_64.txt"
    QEMU_LD_PREFIX=/usr/aarch64-linux-gnu \
        LD_LIBRARY_PATH="$PWD/arm64/tvm_ffi/lib:$PWD/arm64/tvm/lib" \
        qemu-aarch64 ./run_aarch64 "$name-ultra96.bundle/cpu.so" \
        "$(symbols "$name-ultra96.bundle")" "$shape" > "$name.aarch64.txt"
    bytes=$(( $(wc -c < "$name.x86_64.txt") / 2 ))
    machine="$(file -b "$name-ultra96.bundle/cpu.so" | cut -d, -f1-2)"
    if cmp -s "$name.x86_64.txt" "$name.aarch64.txt"; then
        echo "$name ($shape): the output's $bytes bytes the same on x86-64 and on AArch64 ($machine, qemu-aarch64)"
    else
        echo "$name ($shape): DIFFERENT: x86-64 $(cat "$name.x86_64.txt"), aarch64 $(cat "$name.aarch64.txt")"
        status=1
    fi
done
exit $status
