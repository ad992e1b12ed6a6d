import json

import pytest

from simulator.errors import ConfigError
from simulator.hardware import PRESETS, HardwareConfig


def test_default_derived_sizes():
    hw = HardwareConfig.preset("pynq")
    assert (hw.batch, hw.block_in, hw.block_out) == (1, 16, 16)
    assert (hw.inp_elem_bytes, hw.wgt_elem_bytes, hw.acc_elem_bytes, hw.out_elem_bytes) == \
        (16, 256, 64, 16)
    assert (hw.inp_depth, hw.wgt_depth, hw.acc_depth, hw.out_depth, hw.uop_depth) == \
        (2048, 1024, 2048, 2048, 8192)
    assert hw.bitstream == "1x16_i8w8a32_15_15_18_17"
    assert hw.target_model == "pynq_1x16_i8w8a32_15_15_18_17"
    assert hw.peak_gops == pytest.approx(51.2)


def test_presets():
    assert PRESETS["ultra96"].clock_mhz == 333 and PRESETS["ultra96"].bus_bits == 128
    assert PRESETS["de10nano"].bus_bits == 64
    hw = PRESETS["4x8"]
    assert hw.bitstream == "4x8_i8w8a32_15_16_16_18"
    assert hw.inp_elem_bytes == 4 * 8 and hw.acc_elem_bytes == 4 * 8 * 4
    assert hw.inp_depth == (1 << 16) // 32


def test_from_json_roundtrip(tmp_path):
    path = tmp_path / "vta_config.json"
    path.write_text(json.dumps(PRESETS["ultra96"].to_dict()))
    assert HardwareConfig.from_json(path) == PRESETS["ultra96"]
    assert HardwareConfig.resolve(str(path)) == PRESETS["ultra96"]


@pytest.mark.parametrize("change, key", [
    ({"LOG_BLOCK": "4"}, "LOG_BLOCK"),
    ({"LOG_ACC_WIDTH": 4}, "LOG_ACC_WIDTH"),
    ({"TARGET": "gpu"}, "TARGET"),
    ({"LOG_FOO": 1}, "LOG_FOO"),
])
def test_bad_config_names_key(change, key):
    data = {**PRESETS["pynq"].to_dict(), **change}
    with pytest.raises(ConfigError, match=key):
        HardwareConfig.from_dict(data)


def test_missing_key_and_bad_json(tmp_path):
    data = PRESETS["pynq"].to_dict()
    del data["LOG_WGT_BUFF_SIZE"]
    with pytest.raises(ConfigError, match="LOG_WGT_BUFF_SIZE: missing"):
        HardwareConfig.from_dict(data)
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        HardwareConfig.from_json(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        HardwareConfig.from_json(tmp_path / "missing.json")


def test_buffer_too_small_for_an_element():
    with pytest.raises(ConfigError, match="LOG_WGT_BUFF_SIZE"):
        HardwareConfig(log_block=6, log_wgt_buff_size=11)
