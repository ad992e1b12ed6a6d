"""DriverDevice without a VTA library: the binary stream it hands the driver (simulator.isa's
encoding, word for word), the hardware checks that refuse a library before loading it, and
the ``--device`` specs. The runs on a live library are tests/deploy/test_driver_judge.py's."""

from __future__ import annotations

import ast
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from search_spaces import default_schedule
from simulator.hardware import DEFAULT, PRESETS
from simulator.isa import encode_insn, encode_uop
from vtatune.deploy import (
    DeployError,
    DriverDevice,
    SimulatedDevice,
    device_from_spec,
    program_words,
)
from vtatune.lowering import lower
from vtatune.schedule import Schedule
from vtatune.workloads import AddWorkload, Conv2dWorkload, GemmWorkload, deployed


def _programs():
    conv = Conv2dWorkload(1, 8, 8, 32, 32, 3, 1, 1)
    yield lower(conv, Schedule(tile_h=4, tile_w=8, tile_co=1, oc_nthread=2, h_nthread=2),
                DEFAULT).program
    gemm = replace(GemmWorkload(1, 32, 32), epilogue=deployed(6, relu=True))
    yield lower(gemm, default_schedule(gemm, DEFAULT, True), DEFAULT, bias=True).program
    add = AddWorkload(1, 16, 4, 4)
    yield lower(add, default_schedule(add, DEFAULT), DEFAULT).program


@pytest.mark.parametrize("index", range(3))
def test_program_words_are_the_isa_encoding(index):
    program = list(_programs())[index]
    insns, uops = program_words(program, DEFAULT)
    assert insns.dtype == np.uint64 and insns.shape == (len(program), 2)
    assert insns.tobytes() == b"".join(encode_insn(i, DEFAULT) for i in program.instructions)
    assert uops.tolist() == [encode_uop(u, DEFAULT) for u in program.uops]
    kinds = {i.kind.split()[0] for i in program.instructions}
    assert {"LOAD", "STORE", "FINISH"} <= kinds and kinds & {"GEMM", "ALU"}


def test_negative_alu_immediates_are_16_bit_twos_complement():
    # a clip's lower bound: ALU MAX with imm -128 (clip(-128, 127) of a shift epilogue)
    gemm = replace(GemmWorkload(1, 16, 16), epilogue=deployed(2, relu=False))
    program = lower(gemm, default_schedule(gemm, DEFAULT), DEFAULT).program
    negative = [k for k, i in enumerate(program.instructions) if getattr(i, "imm", 0) < 0]
    assert negative
    insns, _ = program_words(program, DEFAULT)
    for k in negative:
        assert insns[k].tobytes() == encode_insn(program.instructions[k], DEFAULT)


def test_a_layout_the_driver_does_not_share_is_refused():
    # ACC 2048 deep (11 index bits), INP 1024 (10): hw_spec.h gives the ALU's source
    # factors and the micro-op's source index ACC's 11 bits, simulator.isa INP's 10
    hw = replace(DEFAULT, log_inp_buff_size=14)
    gemm = GemmWorkload(1, 16, 16)
    program = lower(gemm, default_schedule(gemm, hw), hw).program
    with pytest.raises(DeployError, match=r"ACC and INP buffer depths differ \(11 vs 10"):
        program_words(program, hw)


def _fake_library(tmp_path, config):
    lib = tmp_path / "libvta_fake.so"
    lib.write_bytes(b"not a library")
    if config is not None:
        (tmp_path / "vta_config.json").write_text(json.dumps(config.to_dict()))
    return lib


def test_a_library_of_other_hardware_is_refused_before_it_is_loaded(tmp_path):
    lib = _fake_library(tmp_path, PRESETS["4x8"])
    with pytest.raises(DeployError) as e:
        DriverDevice(lib, DEFAULT)
    assert str(e.value) == ("libvta_fake.so was built for 4x8_i8w8a32_15_16_16_18, the "
                            "programs are for 1x16_i8w8a32_15_15_18_17")


def test_a_library_needs_its_vta_config(tmp_path):
    lib = _fake_library(tmp_path, None)
    with pytest.raises(DeployError, match=r"^no vta_config.json next to .*libvta_fake.so: "):
        DriverDevice(lib, DEFAULT)
    with pytest.raises(DeployError, match=r"^libvta: no library at .*missing.so$"):
        DriverDevice(tmp_path / "missing.so", DEFAULT)


def test_a_file_that_is_no_library_is_one_error(tmp_path):
    lib = _fake_library(tmp_path, replace(DEFAULT, target="sim"))
    with pytest.raises(DeployError, match=r"^cannot load .*libvta_fake.so: "):
        DriverDevice(lib, DEFAULT)


def test_device_specs(tmp_path):
    sim = device_from_spec("sim", PRESETS["ultra96"])
    assert isinstance(sim, SimulatedDevice) and sim.hw == PRESETS["ultra96"]
    with pytest.raises(DeployError) as e:
        device_from_spec("board", DEFAULT)
    assert str(e.value) == "unknown device 'board' (known: sim, libvta:PATH)"
    with pytest.raises(DeployError, match=r"known: sim, libvta:PATH\)$"):
        device_from_spec("libvta:", DEFAULT)
    with pytest.raises(DeployError, match=r"^libvta: no library at .*nothing.so$"):
        device_from_spec(f"libvta:{tmp_path / 'nothing.so'}", DEFAULT)


def _imports(source):
    imported = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module)
    return imported


def test_the_driver_module_imports_numpy_ctypes_and_the_instruction_set_only():
    """What a board runs: no lowering, tuning, Optuna, numba or TVM."""

    source = (Path(__file__).resolve().parents[2] / "vtatune" / "deploy" / "runtime"
              / "_driver.py")
    imported = _imports(source)
    stdlib = {"__future__", "collections.abc", "dataclasses", "os", "pathlib", "typing",
              "weakref"}
    ours = {"simulator.chisel", "simulator.errors", "simulator.hardware", "simulator.isa",
            "simulator.program",
            "simulator.rows", "vtatune.deploy.runtime._device", "vtatune.deploy.runtime._errors",
            "vtatune.deploy.runtime._libvta"}
    assert imported == stdlib | ours | {"numpy"}
    # the library loader runs alone as a script (the probe's child, python -I): stdlib only
    assert _imports(source.with_name("_libvta.py")) == {
        "__future__", "atexit", "ctypes", "dataclasses", "json", "os", "pathlib", "signal",
        "subprocess", "sys"}
