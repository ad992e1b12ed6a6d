"""ALU-only kernels (TVM's add.vta / multiply.vta): bit-exact against numpy, counted and
timed as TVM's own streams for the deployed ResNet-18's residual adds, TVM's space and
fallback, and the token a kernel whose body is its tile loop leaves to the next stream."""

import json
import random
import re
from dataclasses import replace

import pytest

from search_spaces import get_template
from simulator.functional import count
from simulator.hardware import DEFAULT, PRESETS
from simulator.timing import time_program
from tests._data import DEPLOYED
from vtatune.errors import IllegalSchedule
from vtatune.lowering import COMPUTE, STORE, Carry, lower
from vtatune.schedule import Schedule, from_autotvm, to_autotvm
from vtatune.scoring import verify
from vtatune.workloads import AddWorkload, Epilogue, EpilogueOp, MultiplyWorkload

FALLBACK = Schedule(tile_h=1, tile_w=1, tile_co=1, tvm_strict=True)


@pytest.mark.parametrize("workload", [
    AddWorkload(1, 32, 6, 10), AddWorkload(2, 48, 4, 4, rhs_bits=32),
    MultiplyWorkload(1, 32, 5, 5, epilogue=Epilogue((EpilogueOp("shr", 3),
                                                     EpilogueOp("clip", -50, hi=60))))],
    ids=lambda w: w.describe())
def test_random_tiles_are_bit_exact(workload):
    tpl = get_template(workload, DEFAULT)
    legal = list(tpl.legal_configs())
    assert tpl.default_config() == {"tile_co": 1, "tile_h": 1, "tile_w": 1}
    for config in random.Random(workload.key()).sample(legal, min(6, len(legal))):
        v = verify(lower(workload, tpl.to_schedule(config), DEFAULT))
        assert v.ok, (config, v.mismatches)


def test_tvms_space_and_rules():
    add = AddWorkload(1, 64, 56, 56)
    tpl = get_template(add, DEFAULT, space="autotvm", prune=False)
    assert tpl.knob_names == ("tile_co", "tile_h", "tile_w") and tpl.size() == 3 * 8 * 8
    s = tpl.to_schedule({"tile_co": 2, "tile_h": 8, "tile_w": 56})
    assert to_autotvm(s, add, DEFAULT) == {"tile_co": [2, 2], "tile_h": [7, 8],
                                           "tile_w": [1, 56]}
    assert from_autotvm(to_autotvm(s, add, DEFAULT), add, DEFAULT) == s
    lower(add, replace(FALLBACK, tile_h=2), DEFAULT)  # rows of one column: y 2, x 1
    with pytest.raises(IllegalSchedule, match="no 2D DMA pattern"):  # blocks x rows x 1
        lower(add, replace(FALLBACK, tile_co=2, tile_h=2), DEFAULT)
    with pytest.raises(IllegalSchedule, match="two operand tiles need"):
        lower(add, replace(FALLBACK, tile_co=4, tile_h=8, tile_w=56), DEFAULT)


def test_a_tile_loop_body_leaves_its_token_to_the_next_stream():
    add = AddWorkload(1, 64, 56, 56)
    low = lower(add, FALLBACK, PRESETS["sim"])
    assert len(low.program) == 7 * 4 * 56 * 56 + 9  # TVM's count: 7 a tile, 9 more
    assert low.pending_out == ((STORE, COMPUTE),)
    assert time_program(low.program, PRESETS["sim"]).tokens_out == (0, 0, 0, 1)
    one_tile = lower(AddWorkload(1, 16, 1, 1), FALLBACK, PRESETS["sim"])
    assert len(one_tile.program) == 7 + 7 and one_tile.pending_out == ()
    # the next stream takes it: its first compute pop finds the pop pending (a NOP)
    nxt = lower(add, FALLBACK, PRESETS["sim"], carry=Carry((0, 0, 0, 1), low.pending_out))
    assert len(nxt.program) == len(low.program) + 1
    assert time_program(nxt.program, PRESETS["sim"]).tokens_out == (0, 0, 0, 1)


def test_deployed_resnet18_adds_count_and_time_as_tvm():
    adds = [n for n in json.loads(DEPLOYED.read_text())["nodes"]
            if n["device"] == "VTA" and not n["relay_ops"].startswith("nn.conv2d")]
    assert len(adds) == 8
    hw = PRESETS["sim"]
    for n in adds:
        shape = tuple(map(int, re.search(r"\((.*)\)", n["out_type"]).group(1).split(", ")))
        # one cast: the residual was still int32 (the quantized input of the first block)
        rhs = 32 if n["relay_ops"].startswith("cast+add") else 8
        wl = AddWorkload(shape[0] * shape[4], shape[1] * shape[5], shape[2], shape[3], rhs)
        program = lower(wl, FALLBACK, hw).program
        assert count(program, hw).as_dict() == n["counters"], n["nid"]
        assert time_program(program, hw).cycles == n["tvm_stream_cycles"], n["nid"]
