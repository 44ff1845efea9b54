"""deliverykit.outputs: the one atomic-output implementation every package uses.

A complete file appears only at the end; a failure leaves the old file and no
temporary; streams (FIFO, /dev/null, stdout) are written into, never replaced;
the directory is fsynced after the rename."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from deliverykit import outputs
from deliverykit.outputs import (
    fsync_dir,
    fsync_parent,
    is_stream,
    replace_when_done,
    replacing,
    write_when_done,
)


def _temporaries(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))


def test_the_final_name_appears_only_when_the_block_ends(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    with replace_when_done(out) as f:
        f.write("a,b\n")
        f.flush()
        assert not out.exists()  # half-written data lives under the temporary name
        assert len(_temporaries(tmp_path)) == 1
        assert _temporaries(tmp_path)[0].endswith(".part")
    assert out.read_text() == "a,b\n"
    assert _temporaries(tmp_path) == []


def test_a_failure_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    out.write_text("old")
    with pytest.raises(RuntimeError), replace_when_done(out) as f:
        f.write("new, partial")
        raise RuntimeError("disk on fire")
    assert out.read_text() == "old"
    assert _temporaries(tmp_path) == []
    with pytest.raises(KeyboardInterrupt), replacing(out) as tmp:
        tmp.write_text("x")
        raise KeyboardInterrupt
    assert out.read_text() == "old" and _temporaries(tmp_path) == []


def test_a_file_is_replaced_never_written_into(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    out.write_text("old")
    twin = tmp_path / "twin"
    os.link(out, twin)  # written in place, the twin would change too
    write_when_done(out, "new")
    assert out.read_text() == "new" and twin.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "twin"]


def test_a_replaced_file_keeps_its_mode_and_a_new_one_gets_the_umask(tmp_path: Path) -> None:
    old = tmp_path / "kept"
    old.write_text("x")
    old.chmod(0o640)
    write_when_done(old, "y")
    assert stat.S_IMODE(old.stat().st_mode) == 0o640
    mask = os.umask(0o022)
    try:
        new = tmp_path / "new"
        write_when_done(new, b"z")
        assert stat.S_IMODE(new.stat().st_mode) == 0o644  # not mkstemp's 0600
    finally:
        os.umask(mask)


def test_a_symbolic_link_stays_and_its_target_is_replaced(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("old")
    link = tmp_path / "link"
    link.symlink_to(target)
    write_when_done(link, "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_dev_null_is_written_into_never_replaced() -> None:
    assert is_stream("/dev/null") and is_stream("-")
    write_when_done("/dev/null", "anything")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_fifo_is_written_into_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    assert is_stream(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_when_done(fifo, b"through the pipe")
    reader.join(timeout=30)
    assert got == [b"through the pipe"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and _temporaries(tmp_path) == []


def test_dash_writes_to_stdout_after_text_already_printed() -> None:
    code = ("import sys; from deliverykit.outputs import write_when_done;"
            "print('first'); write_when_done('-', b'second\\n'); write_when_done('-', 'third\\n')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "first\nsecond\nthird\n"


def test_the_directory_is_fsynced_after_the_rename(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Observe (not replace) os.fsync: the directory's descriptor is synced after os.replace."""
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync-dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync-file")
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        events.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(outputs.os, "fsync", fsync)
    monkeypatch.setattr(outputs.os, "replace", replace)
    write_when_done(tmp_path / "d.txt", "data")
    assert events == ["fsync-file", "rename", "fsync-dir"]


def test_fsync_dir_is_best_effort_unless_strict(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    fsync_dir(missing)  # no error: best effort
    with pytest.raises(FileNotFoundError):
        fsync_dir(missing, strict=True)
    fsync_parent(tmp_path / "any-file", strict=True)  # its directory exists
