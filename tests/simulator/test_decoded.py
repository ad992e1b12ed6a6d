"""A decoded program kept as bytes (``simulator.decoded``): read back, it runs as the
program decoded afresh, on every kind of step; bytes that name anything but the steps'
own parts, or are damaged, are refused."""

import os
import pickle
import zlib

import numpy as np
import pytest

from simulator.decoded import from_bytes, to_bytes
from simulator.errors import ProgramError
from simulator.functional import decode
from simulator.hardware import DEFAULT
from tests.simulator.test_functional import _DRAM, TINY, _random_program


@pytest.mark.parametrize("hw", [TINY, DEFAULT], ids=["2x8x4", "pynq"])
def test_a_decoded_program_read_back_runs_as_decoded_afresh(hw):
    rng = np.random.default_rng(11)
    kinds = set()
    for _ in range(30):
        program = _random_program(rng, hw)
        fresh = decode(program, hw)
        kept = from_bytes(to_bytes(fresh), program, hw)
        assert kept.program is program and kept.hw == hw and kept.order == fresh.order
        assert [step for step, _ in kept.steps] == [step for step, _ in fresh.steps]
        kinds.update(step.__name__ for step, _ in kept.steps)
        data = rng.integers(-128, 128, _DRAM).astype(np.int8)
        a, b = fresh.run({"data": data}).machine, kept.run({"data": data}).machine
        for got, want in zip((b.dram, b.inp, b.wgt, b.acc, b.uop),
                             (a.dram, a.inp, a.wgt, a.acc, a.uop), strict=True):
            assert np.array_equal(got, want)
        assert not kept.uop.flags.writeable
    assert kinds >= {"_load", "_load_wgt", "_store", "_reset", "_gemm_product",
                     "_gemm_scatter", "_alu_int32", "_alu", "_alu_in_order"}, kinds


def test_bytes_that_name_anything_else_or_are_damaged_are_refused():
    program = _random_program(np.random.default_rng(0), DEFAULT)
    hostile = zlib.compress(pickle.dumps(((0,), ((os.system, ("true",)),), np.zeros(1))))
    with pytest.raises(ProgramError, match=r"^a decoded program names (posix|os|nt)\.system: "
                                           r"not a step's part$"):
        from_bytes(hostile, program, DEFAULT)
    data = to_bytes(decode(program, DEFAULT))
    with pytest.raises(ProgramError, match=r"^a decoded program is damaged \(error: "):
        from_bytes(data[:-10], program, DEFAULT)
