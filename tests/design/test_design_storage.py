"""The design study's storage on a directory it cannot write (read-only, or full): one line,
exit 2, and nothing left behind (issue 27, 11)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from vtatune.cli import main

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice

DESIGN = ["design", "--network", "resnet18", "--board", "pynq", "--trials-per-task", "1",
          "--candidates", "1"]


def tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
            for p in root.rglob("*")}


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vtatune: error: "), err
    return lines[0]


@pytest.mark.parametrize("out", ["designs", "designs/pynq"])
def test_unwritable_directory_is_one_line_and_leaves_nothing(out, tmp_path, monkeypatch,
                                                             capsys):
    """os.open refused as on a read-only directory (EACCES), wherever the test runs (root
    ignores a chmod)."""
    real_open = os.open

    def refusing(path, flags, *args, **kw):
        if flags & os.O_CREAT and str(tmp_path) in str(path):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", refusing)
    monkeypatch.setattr(os, "mkdir", _refusing_mkdir(tmp_path, os.mkdir))
    assert main([*DESIGN, "--out", str(tmp_path / out)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "Permission denied" in line and str(tmp_path) in line
    assert tree(tmp_path) == {}


def _refusing_mkdir(root: Path, real):
    def mkdir(path, *args, **kw):
        if str(root) in str(path):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real(path, *args, **kw)
    return mkdir


@pytest.mark.parametrize("out", ["designs", "."])
def test_full_disk_is_one_line_and_leaves_nothing(out, tmp_path, monkeypatch, capsys):
    """Every write of the journal fails with ENOSPC, as on a full file system: the journal
    it created and the directory it made are removed again."""
    real_write = os.write
    journals: set[int] = set()
    real_open = os.open

    def tracking_open(path, flags, *args, **kw):
        fd = real_open(path, flags, *args, **kw)
        if str(path).endswith("design.journal"):
            journals.add(fd)
        return fd

    def full(fd, data):
        if fd in journals:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "open", tracking_open)
    monkeypatch.setattr(os, "write", full)
    before = tree(tmp_path)
    assert main([*DESIGN, "--out", str(tmp_path / out)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"cannot write journal {tmp_path / out / 'design.journal'}" in line.replace("/./", "/")
    assert "No space left on device" in line
    assert tree(tmp_path) == before


@pytest.fixture
def mounted(tmp_path):
    """A real file system: tmpfs mounted read-only, or 64 KiB filled to the brim (root
    with mount(8) only; elsewhere skipped)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a tmpfs")
    mounts = []

    def mount(options: str) -> Path:
        where = tmp_path / f"fs{len(mounts)}"
        where.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                              capture_output=True, text=True)
        if done.returncode:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounts.append(where)
        return where

    yield mount
    for where in mounts:
        subprocess.run(["umount", str(where)], check=False)


def test_on_a_real_read_only_and_a_real_full_file_system(mounted, capsys):
    read_only = mounted("ro,size=64k")
    assert main([*DESIGN, "--out", str(read_only / "designs")]) == 2
    assert "Read-only file system" in one_error_line(capsys.readouterr().err)
    assert tree(read_only) == {}
    full = mounted("size=64k")
    with open(full / "filler", "wb", buffering=0) as f:  # fill it up
        with pytest.raises(OSError, match="No space left"):
            while True:
                f.write(b"\0" * 4096)
    before = tree(full)
    assert main([*DESIGN, "--out", str(full / "designs")]) == 2
    assert "No space left on device" in one_error_line(capsys.readouterr().err)
    assert tree(full) == before
