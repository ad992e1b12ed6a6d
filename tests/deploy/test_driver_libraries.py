"""Which library DriverDevice takes, and that none can crash the process: small fakes of VTA's
driver API and of TVM's runtime, compiled here with the C compiler (skipped without one),
stand in for a board's driver, fsim, tsim (with and without its hardware library), a library
that is not VTA's, and ones that crash. TVM's own libraries are tests/deploy/test_tsim.py's
(live, with VTATUNE_LIBVTA_TSIM)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from simulator.hardware import DEFAULT
from vtatune.deploy import DeployError, DriverDevice, device_from_spec

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

#: VTA's driver API over host memory; CRASH=1 dereferences NULL in VTADeviceRun.
DRIVER = r"""
#include <stdint.h>
#include <string.h>
static char mem[1 << 22] __attribute__((aligned(4096)));
static size_t used = 4096;
void* VTADeviceAlloc(void) { return mem; }
void VTADeviceFree(void* h) {}
int VTADeviceRun(void* h, uint32_t insn, uint32_t count, uint32_t wait) {
  if (CRASH) return *(volatile int*)0;
  return 0;
}
void* VTAMemAlloc(size_t n, int cached) {
  void* p = mem + used;
  used += (n + 4095) & ~4095u;
  return p;
}
void VTAMemFree(void* p) {}
uint32_t VTAMemGetPhyAddr(void* p) { return (uint32_t)((char*)p - mem); }
void VTAMemCopyFromHost(void* d, const void* s, size_t n) { memcpy(d, s, n); }
void VTAMemCopyToHost(void* d, const void* s, size_t n) { memcpy(d, s, n); }
void VTAFlushCache(void* v, uint32_t p, int n) {}
void VTAInvalidateCache(void* v, uint32_t p, int n) {}
"""

#: TVM's C API as tsim's driver registers it: vta.tsim.init (which starts nothing), a
#: profiler that counts 7 cycles a run; a module file whose name holds "bad" fails to load.
RUNTIME = r"""
#include <stdint.h>
#include <string.h>
typedef union { int64_t v_int64; double v_float64; void* v_handle; const char* v_str; } V;
static const char* names[] = {GLOBALS};
static int inits = 0;
static char status[64];
static const char* error = "";
int TVMFuncGetGlobal(const char* name, void** out) {
  *out = 0;
  for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); ++i)
    if (names[i][0] && !strcmp(name, names[i])) *out = (void*)names[i];
  return 0;
}
int TVMFuncCall(void* f, V* args, int* codes, int n, V* ret, int* code) {
  const char* name = (const char*)f;
  *code = 4;
  if (strstr(name, "init")) { if (CRASH) return *(volatile int*)0; ++inits; return 0; }
  if (strstr(name, "profiler_status")) {
    strcpy(status, "{\"cycle_count\": 7}");
    ret->v_str = status; *code = 11;
  }
  return 0;
}
const char* TVMGetLastError(void) { return error; }
int TVMModLoadFromFile(const char* file, const char* format, void** out) {
  if (strstr(file, "bad") || strcmp(format, "vta-tsim")) {
    error = "TVMError: Check failed: (finit != nullptr) is false: \nStack trace:\n"
            "  File \"module.cc\", line 303\n  [bt] (0) libtvm_runtime.so(...)\n";
    return -1;
  }
  *out = (void*)1;
  return 0;
}
"""

TSIM = '"vta.tsim.init", "vta.tsim.profiler_status", "vta.tsim.profiler_clear"'
FSIM = '"vta.simulator.profiler_status", "vta.simulator.profiler_clear"'


def _compile(source: str, out: Path, **defines: object) -> Path:
    src = out.with_suffix(".c")
    src.write_text(source)
    flags = [f"-D{k}={v}" for k, v in defines.items()]
    subprocess.run(["cc", "-shared", "-fPIC", "-O0", *flags, "-o", str(out), str(src)],
                   check=True)
    return out


def _library(folder: Path, *, runtime: str | None = None, crash: int = 0,
             init_crash: int = 0) -> Path:
    """A fake driver in ``folder`` (with its vta_config.json, and a fake TVM runtime
    registering ``runtime``'s globals next to it)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vta_config.json").write_text(json.dumps(DEFAULT.to_dict()))
    if runtime is not None:
        _compile(RUNTIME, folder / "libtvm_runtime.so", GLOBALS=runtime, CRASH=init_crash)
    return _compile(DRIVER, folder / "libvta_fake.so", CRASH=crash)


def test_a_board_driver_runs_and_counts_nothing(tmp_path):
    dev = DriverDevice(_library(tmp_path), DEFAULT)
    assert (dev.kind, dev.cycle_counter, dev.name) == ("driver", None,
                                                      f"VTA driver {tmp_path}/libvta_fake.so")
    buf = dev.upload(bytearray(b"\x01\x02\x03"))
    assert bytes(dev.download(buf)) == b"\x01\x02\x03"


def test_fsim_is_told_by_its_globals(tmp_path):
    dev = DriverDevice(_library(tmp_path, runtime=FSIM), DEFAULT)
    assert (dev.kind, dev.cycle_counter) == ("fsim", None)


def test_tsim_needs_its_hardware_library(tmp_path):
    lib = _library(tmp_path, runtime=TSIM)
    with pytest.raises(DeployError) as e:
        DriverDevice(lib, DEFAULT)
    assert str(e.value) == (
        "libvta_fake.so is TVM's tsim driver: it needs VTA's verilated RTL, and there is no "
        f"libvta_hw.so next to it (name it: libvta:{lib}:HARDWARE_LIBRARY)")
    bad = tmp_path / "bad_hw.so"
    bad.write_bytes(b"")
    with pytest.raises(DeployError) as e:
        device_from_spec(f"libvta:{lib}:{bad}", DEFAULT)
    assert str(e.value) == (f"{bad}: not VTA's verilated RTL (loaded as a vta-tsim module: "
                            "TVMError: Check failed: (finit != nullptr) is false:)")
    with pytest.raises(DeployError, match=r"^libvta: no hardware library at .*none.so$"):
        device_from_spec(f"libvta:{lib}:{tmp_path / 'none.so'}", DEFAULT)


def test_a_hardware_library_is_for_tsim_only(tmp_path):
    lib = _library(tmp_path, runtime=FSIM)
    hw = tmp_path / "libvta_hw.so"
    hw.write_bytes(b"")
    with pytest.raises(DeployError) as e:
        DriverDevice(lib, DEFAULT, hardware=hw)
    assert str(e.value) == ("libvta_fake.so is not TVM's tsim driver: a hardware library "
                            "(libvta_hw.so) is for tsim only")


def test_libraries_that_crash_are_refused_in_one_line(tmp_path):
    with pytest.raises(DeployError) as e:
        DriverDevice(_library(tmp_path / "run", crash=1), DEFAULT)
    assert str(e.value) == ("libvta_fake.so: loading it and running one instruction killed "
                            "a test process (SIGSEGV); not loaded")
    lib = _library(tmp_path / "init", runtime=TSIM, init_crash=1)
    (tmp_path / "init" / "libvta_hw.so").write_bytes(b"")
    with pytest.raises(DeployError, match=r"killed a test process \(SIGSEGV\); not loaded$"):
        DriverDevice(lib, DEFAULT)


def test_not_a_vta_library(tmp_path):
    lib = _compile("int f(void) { return 1; }", tmp_path / "libother.so")
    (tmp_path / "vta_config.json").write_text(json.dumps(DEFAULT.to_dict()))
    with pytest.raises(DeployError) as e:
        DriverDevice(lib, DEFAULT)
    assert str(e.value) == ("libother.so does not export VTADeviceAlloc (not a VTA driver "
                            "library)")


SCRIPT = """
import atexit, sys
from simulator.hardware import DEFAULT
from vtatune.deploy import DeployError, DriverDevice
from vtatune.deploy.runtime import end_process
atexit.register(print, "earlier exit hook ran")
lib, other, how = sys.argv[1:]
dev = DriverDevice(lib, DEFAULT)
print(dev.kind, dev.cycle_counter, DriverDevice(lib, DEFAULT)._loaded is dev._loaded)
try:
    DriverDevice(other, DEFAULT)
except DeployError as e:
    print(e)
if how == "status":
    end_process(3)
elif how == "raise":
    raise RuntimeError("uncaught")
"""


@pytest.mark.parametrize(("how", "status"), [("end", 0), ("status", 3), ("raise", 1)])
def test_tsim_one_simulation_a_process_ended_by_os_exit(tmp_path, how, status):
    """A second tsim library in the process is refused; the process leaves through the exit
    hook (os._exit, after the hooks registered before it) with its status."""
    libs = []
    for name in ("a", "b"):
        libs.append(_library(tmp_path / name, runtime=TSIM))
        (tmp_path / name / "libvta_hw.so").write_bytes(b"")
    done = subprocess.run([sys.executable, "-c", SCRIPT, *map(str, libs), how],
                          capture_output=True, text=True, check=False)
    assert done.returncode == status, done.stderr
    assert done.stdout.splitlines() == [
        "tsim RTL True",
        f"libvta_fake.so: one tsim simulation per process, and {tmp_path}/a/libvta_hw.so "
        "is running in this one",
        "earlier exit hook ran"]
    assert ("RuntimeError: uncaught" in done.stderr) == (how == "raise")


def test_tsim_runs_report_the_rtl_counter(tmp_path):
    """run returns the RTL's cycles (tsim's profiler, cleared before each run); the device
    says so (cycle_counter), in a child process: tsim's exit hook ends it."""
    lib = _library(tmp_path, runtime=TSIM)
    (tmp_path / "libvta_hw.so").write_bytes(b"")
    script = textwrap.dedent(f"""
        from search_spaces import default_schedule
        from simulator.hardware import DEFAULT
        from vtatune.deploy import DriverDevice
        from vtatune.lowering import lower
        from vtatune.workloads import GemmWorkload
        dev = DriverDevice({str(lib)!r}, DEFAULT)
        wl = GemmWorkload(1, 16, 16)
        program = lower(wl, default_schedule(wl, DEFAULT), DEFAULT).program
        bufs = {{t.name: dev.alloc(t.shape, t.dtype) for t in program.tensors}}
        print(dev.run(program, bufs), dev.run(program, bufs), dev.counters, dev.name)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (f"7 7 {{'cycle_count': 7}} VTA's RTL (tsim {lib}, "
                                   f"{tmp_path}/libvta_hw.so)")


def test_a_report_puts_the_rtls_cycles_beside_the_timing_models():
    import numpy as np

    from vtatune.deploy import DeployResult, OffloadedCall

    calls = tuple(OffloadedCall(f"conv2d_{k}", "conv2d", "w", "s", "log", "p", "r", 1, rtl,
                                model_cycles=model)
                  for k, (rtl, model) in enumerate([(1003, 1000), (1998, 2000)], 1))
    result = DeployResult("m", DEFAULT, "VTA's RTL", calls, (), 3001, np.zeros(1), {}, 0,
                          "RTL")
    assert result.vta_model_cycles == 3000
    text = result.report()
    assert text.splitlines()[3:6] == [
        "  layer     workload  schedule from  requantization  passes  cycles (RTL)  timing model"
        "     difference",
        "  conv2d_1  w         p              r                    1         1,003         1,000"
        "  +3 (+0.300 %)",
        "  conv2d_2  w         p              r                    1         1,998         2,000"
        "  -2 (-0.100 %)"]
    assert text.endswith("VTA time: 3,001 cycles = 0.030 ms at 100 MHz (RTL)\n"
                         "timing model: 3,000 cycles (the RTL: +1 (+0.033 %))")
    d = result.as_dict()
    assert (d["cycle_counter"], d["vta_model_cycles"], d["offloaded"][1]["model_cycles"]) == (
        "RTL", 3000, 2000)
    plain = DeployResult("m", DEFAULT, "sim", calls[:1], (), 1003, np.zeros(1))
    assert plain.vta_model_cycles is None and "timing model:" not in plain.report()
    assert "cycle_counter" not in plain.as_dict()
