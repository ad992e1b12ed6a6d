"""Tuning logs: complete lines, tolerant reading, best, replay."""

import json

import pytest

from vtatune.cli import main
from vtatune.records import (
    LogError,
    RecordPrefix,
    RecordWarning,
    RecordWriter,
    best_records,
    encode_record,
    read_records,
    replay,
    write_whole,
)
from vtatune.tuning import tune
from vtatune.workloads import GemmWorkload

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice

SMALL = GemmWorkload(1, 64, 64)
FIELDS = {"schema", "workload", "hw", "bias", "template", "config", "schedule", "status",
          "cycles", "counters", "seconds", "gops", "utilization", "trial", "timestamp",
          "study", "sampler", "seed", "version"}


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    path = tmp_path_factory.mktemp("records") / "small.jsonl"
    tune(SMALL, trials=6, seed=3, log=path)
    return path


def test_lines_complete_and_parseable(log):
    lines = log.read_text().splitlines(keepends=True)
    assert lines and all(line.endswith("\n") for line in lines)
    records = [json.loads(line) for line in lines]
    ok = [r for r in records if r["status"] == "ok"]
    assert len(ok) == 6
    for r in records:
        assert FIELDS <= set(r)
        assert r["workload"]["key"] == SMALL.key() and r["hw"]["config"]["LOG_BLOCK"] == 4
    assert all(set(r["counters"]) >= {"gemm_counter", "inp_load_nbytes"} for r in ok)


def test_truncated_line_skipped_with_warning(log, tmp_path):
    broken = tmp_path / "broken.jsonl"
    text = log.read_text()
    broken.write_text(text + text.splitlines()[0][:40])
    n = len(text.splitlines())
    with pytest.warns(RecordWarning, match=f":{n + 1}: skipped"):
        rows = list(read_records(broken))
    assert len(rows) == n
    # Appending after a broken line starts a fresh line.
    with RecordWriter(broken) as w:
        w.write({"schema": 1, "status": "ok"})
    with pytest.warns(RecordWarning):
        assert list(read_records(broken))[-1][1] == {"schema": 1, "status": "ok"}


def test_best_and_replay(log, capsys):
    best = best_records(read_records(log))
    assert len(best) == 1
    assert best[0].cycles == min(r["cycles"] for _, r in read_records(log) if r["status"] == "ok")
    assert replay(log).ok and replay(log, best=True).replayed == 1
    assert main(["replay", str(log)]) == 0
    assert "cycles and counters identical" in capsys.readouterr().out
    assert main(["best", str(log)]) == 0
    out = capsys.readouterr().out
    assert f"cycles {best[0].cycles:,}" in out and "--schedule" in out


def test_replay_detects_tampered_line(log, tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    lines = log.read_text().splitlines()
    n = next(i for i, line in enumerate(lines) if json.loads(line)["status"] == "ok")
    r = json.loads(lines[n])
    r["cycles"] += 1
    lines[n] = json.dumps(r)
    bad.write_text("\n".join(lines) + "\n")
    assert main(["replay", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:{n + 1}: cycles" in err and f"lines {n + 1})" in err


def test_a_file_of_garbage_is_refused_in_one_error_without_warnings(tmp_path):
    import warnings

    from vtatune.records import MAX_WARNINGS

    junk = tmp_path / "junk.jsonl"
    junk.write_text("".join(f"not json {i}\n" for i in range(MAX_WARNINGS + 15)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(LogError, match=f"^{junk} is not a vtatune log \\(none of its "
                                           f"{MAX_WARNINGS + 15} lines is a record\\)$"):
            list(read_records(junk))


def test_garbage_around_records_gets_a_bounded_number_of_warnings(tmp_path):
    from vtatune.records import MAX_WARNINGS

    log = tmp_path / "l.jsonl"
    log.write_text("".join(f"not json {i}\n" for i in range(MAX_WARNINGS + 5))
                   + '{"schema": 1, "status": "ok"}\n' + "x\n" * 10)
    with pytest.warns(RecordWarning) as caught:
        assert [n for n, _ in read_records(log)] == [MAX_WARNINGS + 6]
    messages = [str(w.message) for w in caught]
    assert len(messages) == MAX_WARNINGS + 1
    assert messages[0].startswith(f"{log}:1: skipped a corrupt or truncated record")
    assert messages[-1] == f"{log}: 15 more lines skipped"


def test_an_empty_log_reads_as_no_record_unless_records_are_required(tmp_path):
    log = tmp_path / "e.jsonl"
    log.write_text("\n")
    assert list(read_records(log)) == []
    with pytest.raises(LogError, match=f"^{log} is not a vtatune log \\(it is empty\\)$"):
        list(read_records(log, empty_ok=False))


def test_a_records_score_reads_back_as_the_evaluation(tmp_path):
    from simulator.hardware import DEFAULT
    from tests._logs import record, write_log
    from vtatune.schedule import Schedule
    from vtatune.scoring import Score, score
    from vtatune.workloads import GemmWorkload

    wl, s = GemmWorkload(16, 64, 64), Schedule(tile_b=4, tile_ci=4, tile_co=4)
    log = write_log(tmp_path / "e.jsonl", [record(wl, s, DEFAULT, 0)])
    (_, r), = read_records(log)
    assert Score.from_dict(r) == score(wl, s, DEFAULT)


def test_records_name_their_timing_model_and_older_ones_replay_without_false_mismatches(
        log, tmp_path, capsys):
    """Each record carries the fingerprint of the profile that scored it; a record scored
    by another model (here: the field removed, as in logs made before the RTL calibration,
    and its cycles changed) has its counters checked but its cycles not compared."""
    from simulator.hardware import HardwareConfig
    from simulator.timing import TimingProfile

    lines = log.read_text().splitlines()
    oks = [i for i, line in enumerate(lines) if json.loads(line)["status"] == "ok"]
    first = json.loads(lines[oks[0]])
    hw = HardwareConfig.from_dict(first["hw"]["config"])
    assert first["timing"] == TimingProfile.for_hw(hw).fingerprint()
    old = tmp_path / "old.jsonl"
    for i in oks:
        r = json.loads(lines[i])
        del r["timing"]
        r["cycles"] += 7
        lines[i] = json.dumps(r)
    old.write_text("\n".join(lines) + "\n")
    report = replay(old)
    assert report.ok and report.other_timing == report.replayed == len(oks)
    assert main(["replay", str(old)]) == 0
    out = capsys.readouterr().out
    assert f"counters identical; cycles of {len(oks)} not compared" in out
    r = json.loads(lines[oks[0]])
    r["counters"]["gemm_counter"] += 1  # counters still count
    lines[oks[0]] = json.dumps(r)
    old.write_text("\n".join(lines) + "\n")
    assert main(["replay", str(old)]) == 1
    assert "counters differ: gemm_counter" in capsys.readouterr().err


@pytest.mark.parametrize("head, rest", [
    ({"schema": 1, "hw": {"config": {"LOG_BATCH": 0}}, "seed": 7}, {"config": {"a": 1}}),
    ({}, {"trial": 3}),
    ({"schema": 1}, {}),
])
def test_a_record_prefix_encodes_as_the_whole_record(head, rest):
    """A study's shared fields encoded once give the same line as the whole record."""
    assert RecordPrefix(head).line(rest) == encode_record({**head, **rest})
    assert json.loads(RecordPrefix(head).line(rest)) == {**head, **rest}


def test_write_whole_makes_files_as_open_would(tmp_path):
    """A file written whole has mode 0666 less the umask, like any file the process creates,
    and the umask is left as it was; no temporary file stays beside it."""
    import os
    import stat

    previous = os.umask(0o027)
    try:
        write_whole({tmp_path / "a.json": b"{}\n", tmp_path / "sub" / "b.json": b"[]\n"})
        assert os.umask(0o027) == 0o027
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "sub" / "b.json").stat().st_mode) == 0o640
    assert (tmp_path / "sub" / "b.json").read_bytes() == b"[]\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "sub"]


def test_append_json_line_appends_one_whole_line_each(tmp_path):
    from vtatune.records import append_json_line

    path = tmp_path / "results.jsonl"
    append_json_line(path, {"model": "a", "cycles": 1})
    append_json_line(str(path), [2, 3])
    assert path.read_text() == '{"model": "a", "cycles": 1}\n[2, 3]\n'
