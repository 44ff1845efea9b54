"""The libswift wrapper (swift/conformance/libswift_wrapper.py) without libswift: its directory
handling.

The real libswift binary exists only where a user built it (``LIBSWIFT_BIN``;
docs/conformance.md). Here a stand-in takes libswift's command line *with libswift's file
semantics* (as of commit dda307f):

- ``-f FILE``: seeds FILE and writes ``FILE.mhash`` / ``FILE.mbinmap`` beside it, prints
  ``Root hash: X``;
- ``-t PEER -h ROOT``: saves ``./ROOT`` and ``./ROOT.mhash`` in its working directory; ``-o DIR``
  is ``--destdir`` (chdir, a failure ignored); a complete ``./ROOT`` already there (a checkpoint)
  ends the run with exit 0 at once, as libswift's "download and quit" mode does;

and runs our peer in its libswift profile behind that, through the same wrapper code path the
real binary takes (registry entry ``libswift``, ``$LIBSWIFT_BIN``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from deliverykit.conformance import Unsupported, load_registry
from swift.conformance import harness as H

STAND_IN = textwrap.dedent('''
    """libswift's command line and file semantics, our peer (libswift profile) doing the
    protocol."""
    import os, signal, subprocess, sys
    a = sys.argv[1:]
    opt = {a[i]: a[i + 1] for i in range(0, len(a) - 1, 2)}
    py = [sys.executable, "-m", "swift"]
    if "-o" in opt:
        try:
            os.chdir(opt["-o"])  # --destdir; libswift ignores a failed chdir
        except OSError:
            pass
    if "-f" in opt:
        f = opt["-f"]
        for ext in (".mhash", ".mbinmap"):
            open(f + ext, "wb").write(b"stand-in tree state")
        host, port = opt["-l"].rsplit(":", 1)
        child = subprocess.Popen(py + ["seed", os.path.abspath(f), "--host", host, "--port", port,
                                       "--chunk-size", opt["-z"], "--profile", "libswift"],
                                 stdout=subprocess.PIPE)
        signal.signal(signal.SIGTERM, lambda *_: child.terminate())
        root = child.stdout.readline().decode().strip()
        print(f"Root hash: {root}", flush=True)
        sys.exit(child.wait())
    root = opt["-h"]
    if os.path.exists(root) and not os.path.exists(root + ".part"):
        sys.exit(0)  # a complete ./ROOT from an earlier run: libswift's checkpoint says complete
    open(root + ".mhash", "wb").write(b"stand-in tree state")
    cp = subprocess.run(py + ["download", root, "--peer", opt["-t"], "-o", root,
                              "--host", "127.0.0.1", "--chunk-size", opt["-z"],
                              "--profile", "libswift", "--timeout", "6", "-q"])
    sys.exit(cp.returncode)
''')


@pytest.fixture
def stand_in(tmp_path, monkeypatch) -> Path:
    """$LIBSWIFT_BIN = the stand-in; TMPDIR = an empty directory of this test (to see what is
    left there)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "stand_in.py").write_text(STAND_IN)
    fake = bindir / "libswift"
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} {bindir / 'stand_in.py'} \"$@\"\n")
    fake.chmod(0o755)
    monkeypatch.setenv("LIBSWIFT_BIN", str(fake))
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    H.set_profile("libswift")
    yield fake
    H.set_profile("rfc")


def _content(path: Path, size: int = 40 * 1024 - 100) -> str:
    H.make_content(str(path), size, seed=3)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _wrapper(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "swift.conformance.libswift_wrapper", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_without_libswift_bin_every_role_is_unsupported(tmp_path, monkeypatch):
    """Only $LIBSWIFT_BIN is used: unset, a `swift` on PATH (the Swift compiler, the OpenStack
    client...) is not taken for libswift, and the case is unsupported (exit 127) with a one-line
    reason."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "swift").write_text("#!/bin/sh\nexit 0\n")
    (bindir / "swift").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("LIBSWIFT_BIN", raising=False)
    with pytest.raises(Unsupported):
        load_registry()["libswift"].run("leech", "00" * 20, "127.0.0.1:9",
                                        "-o", str(tmp_path / "x"), timeout=30)
    cp = _wrapper("seed", str(tmp_path / "x"), "--port", "9", cwd=tmp_path)
    assert cp.returncode == 127 and "LIBSWIFT_BIN" in cp.stderr and "Traceback" not in cp.stderr


def test_leech_writes_the_output_path_and_leaves_nothing_behind(stand_in, tmp_path):
    """The download lands at -o FILE (not ./ROOT in the caller's directory, not in an -o
    'destdir'); the caller's working directory and the output's directory hold nothing else
    afterwards."""
    src = tmp_path / "src"
    src.mkdir()
    digest = _content(src / "content.bin")
    outdir, cwd = tmp_path / "out", tmp_path / "cwd"
    outdir.mkdir()
    cwd.mkdir()
    with H.our_seeder(str(src / "content.bin"), "chunk32", 1024) as (addr, root):
        cp = _wrapper("leech", root, f"{addr[0]}:{addr[1]}", "-o", str(outdir / "got.bin"),
                      "--timeout", "30", cwd=cwd)
    assert cp.returncode == 0, cp.stderr[-2000:]
    assert hashlib.sha256((outdir / "got.bin").read_bytes()).hexdigest() == digest
    assert sorted(os.listdir(outdir)) == ["got.bin"], (
        "the wrapper's working directory was left behind")
    assert os.listdir(cwd) == [], (
        "libswift's ./ROOT or ./ROOT.mhash landed in the caller's directory")


def test_leech_cannot_pass_on_what_an_earlier_case_left(stand_in, tmp_path):
    """Two cases download the same root: the second, from a peer that is not there, must fail.
    With a shared working directory libswift would find the first case's complete ./ROOT and
    exit 0."""
    src = tmp_path / "src"
    src.mkdir()
    _content(src / "content.bin")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    with H.our_seeder(str(src / "content.bin"), "chunk32", 1024) as (addr, root):
        first = _wrapper("leech", root, f"{addr[0]}:{addr[1]}", "-o", str(tmp_path / "one.bin"),
                         cwd=cwd)
    assert first.returncode == 0, first.stderr[-2000:]
    gone = H.free_udp_port()
    second = _wrapper("leech", root, f"127.0.0.1:{gone}", "-o", str(tmp_path / "two.bin"),
                      "--timeout", "4", cwd=cwd)
    assert second.returncode == 1, (
        f"exit {second.returncode}: completed from nobody ({second.stderr[-500:]!r})")
    assert not (tmp_path / "two.bin").exists(), (
        "an incomplete download appeared under the output name")
    assert "libswift_wrapper: error:" in second.stderr and "Traceback" not in second.stderr


def test_seed_works_on_a_scratch_copy_and_cleans_up(stand_in, tmp_path):
    """Seeding: READY carries libswift's root hash; libswift's FILE.mhash / FILE.mbinmap never
    appear beside the case's file; after SIGTERM the scratch directory is gone; our leecher gets
    the file."""
    src = tmp_path / "src"
    src.mkdir()
    digest = _content(src / "content.bin")
    impl = load_registry()["libswift"]
    port = H.free_udp_port()
    with impl.start("seed", str(src / "content.bin"), "--port", port, "--addressing", "chunk32",
                    ready_line="READY") as proc:
        root = proc.ready_line.split()[1]
        assert len(root) == 40 and int(root, 16) >= 0
        cp = H.our_leech(root, ("127.0.0.1", port), str(tmp_path / "got.bin"), "chunk32", 1024,
                         timeout=20)
        assert cp.returncode == 0, cp.stderr[-2000:]
        assert sorted(os.listdir(src)) == ["content.bin"], (
            "libswift's tree files were written beside FILE")
    assert hashlib.sha256((tmp_path / "got.bin").read_bytes()).hexdigest() == digest
    assert os.listdir(os.environ["TMPDIR"]) == [], "the seeder's scratch directory was left behind"


def test_addressing_methods_declared(stand_in, tmp_path):
    """chunk32 runs; every other method is unsupported (127) in both roles: libswift's command
    line runs chunk32 swarms only (bin32 is its legacy protocol; see the wrapper's docstring)."""
    (tmp_path / "c.bin").write_bytes(b"x" * 3000)
    impl = load_registry()["libswift"]
    with impl.start("seed", str(tmp_path / "c.bin"), "--port", H.free_udp_port(),
                    "--addressing", "chunk32", ready_line="READY") as proc:
        assert proc.ready_line.startswith("READY ")
    for role, args in (("seed", [str(tmp_path / "c.bin"), "--port", "9"]),
                       ("leech", ["00" * 20, "127.0.0.1:9", "-o", str(tmp_path / "o")])):
        for addressing in ("bin32", "byte64", "bin64", "chunk64"):
            with pytest.raises(Unsupported):
                impl.run(role, *args, "--addressing", addressing, timeout=30)
    assert impl.env == {"PPSPP_PROFILE": "libswift"}
