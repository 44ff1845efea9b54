"""Peak memory of the PPSPP peer (issue 17; docs/swift-perf.md, "Peak memory
(session 16)"): what the ``ppspp`` process does not load or hold.

* asyncio is imported with ``ssl`` blocked by the command's entry point, so
  OpenSSL's libssl is never mapped (library users keep asyncio's TLS);
* the SHA-1 tree a seeder offers libswift leechers holds no hashes until a
  SHA-1 peer asks, and SHA-256 peers never make it load them;
* a file's tree is hashed straight into its flat buffer (no buffer of leaf
  digests beside it at the build's peak).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from swift.aio.files import deferred_tree, load_or_build_tree, mhash_path
from swift.aio.node import SwiftNode, downloader
from swift.aio.storage import FileStorage
from swift.core.config import PeerConfig
from swift.core.content import Content
from swift.core.merkle import DeferredTree, IntegrityError, MerkleTree
from swift.core.peer import Peer
from swift.wire.constants import HashFunc

#: modules a plain seed or download must never load (their shared libraries or
#: their weight): TLS, the scapy layer definitions, the progress bar, live crypto
NEVER = ("_ssl", "scapy", "rich", "cryptography")


def _maps(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def _imported(stderr: str) -> set[str]:
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines()
            if line.startswith("import time:")}


def test_seed_and_download_load_no_ssl_scapy_or_rich(tmp_path: Path) -> None:
    """A ``ppspp seed`` and a ``ppspp download`` of it, over loopback: neither
    process maps libssl, nor imports any of NEVER (``-X importtime`` lists what
    each imported; /proc/PID/maps what the seeder mapped)."""
    src = tmp_path / "c.bin"
    src.write_bytes(os.urandom(40 * 1024))
    seed = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "swift", "seed", str(src),
                             "--host", "127.0.0.1", "--port", "0", "--duration", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        root = seed.stdout.readline().strip()  # type: ignore[union-attr]  # PIPE
        err = []
        while True:  # the import lines come first, then "seeding ... on HOST:PORT"
            line = seed.stderr.readline()  # type: ignore[union-attr]  # PIPE
            assert line, "".join(err[-5:])
            err.append(line)
            if line.startswith("seeding "):
                break
        port = int(line.rsplit(":", 1)[1])
        seed_maps = _maps(seed.pid)
        got = subprocess.run([sys.executable, "-X", "importtime", "-m", "swift", "download", root,
                              "--peer", f"127.0.0.1:{port}", "-o", str(tmp_path / "out.bin"),
                              "--timeout", "30"], capture_output=True, text=True, timeout=60)
    finally:
        seed.kill()
        seed.wait(10)
        seed.stdout.close()  # type: ignore[union-attr]  # PIPE
        seed.stderr.close()  # type: ignore[union-attr]  # PIPE
    assert got.returncode == 0, got.stderr[-500:]
    assert (tmp_path / "out.bin").read_bytes() == src.read_bytes()
    assert "libssl" not in seed_maps and "_ssl." not in seed_maps
    assert "libcrypto" in seed_maps  # the search sees a library it maps (hashlib's)
    for mods in (_imported("".join(err)), _imported(got.stderr)):
        assert "asyncio" in mods and "swift.aio.node" in mods
        assert not {m for m in mods if m.split(".")[0] in NEVER}, sorted(mods)


def test_library_users_keep_asyncio_tls() -> None:
    """Importing the package, its CLI module or the node as a library changes
    nothing in asyncio: TLS stays available (only the command blocks it)."""
    code = ("import swift.cli, swift.aio.node, asyncio.sslproto as p, asyncio.base_events as b;"
            "import sys; assert p.ssl is not None and b.ssl is not None;"
            "assert sys.modules['ssl'] is not None")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_the_command_still_imports_ssl_on_demand() -> None:
    """After the entry point, a later ``import ssl`` works (only asyncio's own
    TLS was given up): the block is lifted once asyncio is imported."""
    code = ("import sys; sys.argv = ['ppspp', 'seed'];"
            "import swift.__main__ as m; m._asyncio_without_ssl();"
            "import asyncio.base_events as b; assert b.ssl is None;"
            "import ssl; assert ssl.OPENSSL_VERSION")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_file_tree_is_hashed_in_place(tmp_path: Path) -> None:
    """The build's traced peak stays within the tree's own buffers plus a
    quarter of the leaf digests' size: the old buffer of every leaf digest
    (n x 32 bytes) beside the tree is gone."""
    n = 1 << 14
    p = tmp_path / "f.bin"
    p.write_bytes(os.urandom(n * 16))
    with p.open("rb") as f:
        tracemalloc.start()
        try:
            t = MerkleTree.from_file(f, HashFunc.SHA256, 16)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    tree = len(t._hashes) + len(t._known)
    assert peak < tree + n * 32 // 4, (peak, tree)
    data = p.read_bytes()
    ref = MerkleTree.from_file(io.BytesIO(data), HashFunc.SHA256, 16)  # the other path
    assert (t.root_hash, t.size, t._hashes, t._known) == (ref.root_hash, ref.size, ref._hashes,
                                                          ref._known)


@pytest.mark.parametrize("size", [1, 1023, 1024, 1025, 7 * 1024 + 3])
def test_in_place_build_equals_the_reference(tmp_path: Path, size: int) -> None:
    p = tmp_path / "f.bin"
    data = os.urandom(size)
    p.write_bytes(data)
    for func in (HashFunc.SHA1, HashFunc.SHA256):
        with p.open("rb") as f:
            t = MerkleTree.from_file(f, func, 1024)
        ref = MerkleTree.build([data[i:i + 1024] for i in range(0, size, 1024)], func, 1024)
        assert (t.root_hash, t.size, t.n_chunks) == (ref.root_hash, size, ref.n_chunks)
        assert t._hashes == ref._hashes and t._known == ref._known


def test_deferred_tree_loads_once_and_checks_the_root(tmp_path: Path) -> None:
    p = tmp_path / "f.bin"
    p.write_bytes(os.urandom(5000))
    got = deferred_tree(str(p), HashFunc.SHA1, 1024)
    t = got.tree
    assert isinstance(t, DeferredTree) and not t.loaded
    assert os.path.exists(mhash_path(str(p), HashFunc.SHA1, 1024))
    full = load_or_build_tree(str(p), HashFunc.SHA1, 1024).tree
    assert t.n_chunks == full.n_chunks == 5 and t.size == 5000 and not t.loaded
    assert t.peaks() == full.peaks() and t.loaded
    assert t.uncles(3) == full.uncles(3)
    # a file changed under the seeder: the reload is another root, refused
    p.write_bytes(os.urandom(5000))
    again = deferred_tree(str(p), HashFunc.SHA1, 1024)
    p.write_bytes(os.urandom(5000))
    with pytest.raises(IntegrityError):
        again.tree.hash(0)


def test_sha256_peers_never_load_the_sha1_tree(tmp_path: Path) -> None:
    """A seeder serving both swarms, as ``ppspp seed`` does: a SHA-256
    download leaves the SHA-1 tree unloaded; a SHA-1 download then loads it
    and gets the whole file (real UDP on loopback)."""
    src = tmp_path / "c.bin"
    data = os.urandom(300 * 1024 + 17)
    src.write_bytes(data)
    sha1 = deferred_tree(str(src), HashFunc.SHA1, 1024).tree
    assert isinstance(sha1, DeferredTree)
    sha256 = load_or_build_tree(str(src), HashFunc.SHA256, 1024).tree
    storage = FileStorage(str(src))
    cfg1 = PeerConfig(hash_func=HashFunc.SHA1)

    async def run() -> list[bool]:
        node = SwiftNode(Peer(Content.seeded(sha256, storage), PeerConfig()), "127.0.0.1", 0)
        node.storage = storage
        loaded = []
        async with node:
            node.add_swarm(Peer(Content.seeded(sha1, storage), cfg1))
            for root, cfg, name in ((sha256.root_hash, PeerConfig(), "a.bin"),
                                    (sha1.root_hash, cfg1, "b.bin")):
                async with downloader(root, str(tmp_path / name), cfg) as d:
                    d.connect(("127.0.0.1", node.port))
                    assert await d.wait_complete(60)
                loaded.append(sha1.loaded)
        return loaded

    assert asyncio.run(run()) == [False, True]
    for name in ("a.bin", "b.bin"):
        assert hashlib.sha256((tmp_path / name).read_bytes()).digest() == \
            hashlib.sha256(data).digest()


def test_resume_state_packs_the_known_flags(tmp_path: Path) -> None:
    """A part-verified tree's state: flags 8 a byte in base64 (a quarter of the
    old hex text; the saving thread's transient memory with it), loaded back
    exactly; a state written in the old hex form still loads."""
    import json

    data = os.urandom(40 * 1024 + 5)
    full = MerkleTree.build([data[i:i + 1024] for i in range(0, len(data), 1024)],
                            HashFunc.SHA256, 1024)
    t = MerkleTree.for_root(full.root_hash, HashFunc.SHA256, 1024, size=len(data))
    assert t.offer_peaks(full.peaks())
    for c in (0, 3, 17, 40):
        assert t.verify(c, data[c * 1024:(c + 1) * 1024], dict(full.uncles(c)))
    path = str(tmp_path / "s.mhash")
    t.save(path)
    meta = json.loads(Path(path + ".json").read_text())
    assert meta["known"] is None and len(meta["known_bits"]) <= len(t._known) // 6 + 4
    back = MerkleTree.load(path)
    assert back._known == t._known and back._hashes == t._hashes
    meta["known"], meta["known_bits"] = bytes(t._known).hex(), None  # the old form
    Path(path + ".json").write_text(json.dumps(meta))
    assert MerkleTree.load(path)._known == t._known


@pytest.mark.parametrize("n", [1, 2, 3, 5, 64, 65, 100, 1023, 1025])
def test_tree_buffer_ends_at_the_last_node_over_the_content(n: int) -> None:
    """The flat buffer holds every bin up to the highest node of the root's
    tree whose range starts inside the content, and no more (it was sized to
    the covering power of two: 22 % more bins for 102,400 chunks)."""
    from swift.core import bins as B
    from swift.core.merkle import _nbins

    data = os.urandom(n * 16 - 3)
    t = MerkleTree.from_file(io.BytesIO(data), HashFunc.SHA1, 16)
    root_layer = B.layer(B.covering(n))
    need = [b for b in range(4 * n) if B.base_range(b)[0] < n and B.layer(b) <= root_layer]
    assert len(t._known) == _nbins(n) == max(need) + 1
    assert all(t.known(b) for b in need)  # every node over the content is in it
    ref = MerkleTree.build([data[i:i + 16] for i in range(0, len(data), 16)], HashFunc.SHA1, 16)
    assert t.root_hash == ref.root_hash and t.peaks() == ref.peaks()


def test_hash_files_of_the_old_layout_still_load(tmp_path: Path) -> None:
    """Files saved with the buffer sized to the covering power of two (a
    seeder's cache, a download's resume state) load: the prefix is the tree."""
    import json

    from swift.core.merkle import _old_nbins

    data = os.urandom(100 * 1024 + 9)
    full = MerkleTree.build([data[i:i + 1024] for i in range(0, len(data), 1024)],
                            HashFunc.SHA256, 1024)
    t = MerkleTree.for_root(full.root_hash, HashFunc.SHA256, 1024, size=len(data))
    assert t.offer_peaks(full.peaks())
    for c in (1, 50, 100):
        assert t.verify(c, data[c * 1024:(c + 1) * 1024], dict(full.uncles(c)))
    old = _old_nbins(101)
    assert old > len(t._known)
    for tree, known in ((full, None), (t, bytes(t._known) + bytes(old - len(t._known)))):
        path = str(tmp_path / f"{id(tree)}.mhash")
        raw = bytes(tree._hashes) + bytes((old - len(tree._known)) * 32)
        Path(path).write_bytes(raw)
        meta = {"version": 1, "root_hash": tree.root_hash.hex(), "hash_func": int(HashFunc.SHA256),
                "chunk_size": 1024, "n_chunks": 101, "size": tree.size,
                "known": known.hex() if known else None}
        Path(path + ".json").write_text(json.dumps(meta))
        back = MerkleTree.load(path)
        assert back._hashes == tree._hashes and back.peaks() == tree.peaks()
        if known:  # a complete tree's file says "all known" (bins past the content too)
            assert back._known == tree._known
