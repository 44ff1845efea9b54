"""FEC test vectors: the parameter sets, their text format, and where they live.

A vector file (``tests/vectors/fec/*.vec``) is text: ``#`` comment lines (the
first ones name the source of the vector), then ``key value`` lines:
``code`` (ldpc or rs), ``k``, ``n``, ``n1`` and ``seed`` (ldpc only), ``E``,
``source`` (hex, k*E bytes) and ``repair`` (hex, (n-k)*E bytes).
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

from deliverykit.conformance import vectors_dir as shared_vectors_dir
from deliverykit.outputs import write_when_done

#: (code, k, n, n1, seed, E): small enough to read, varied enough to catch a
#: PRNG or matrix slip (N1 3..10, seeds near both ends of the range, k=1).
LDPC_SETS: list[tuple[int, int, int, int, int]] = [
    (1, 4, 3, 1, 4),
    (4, 8, 3, 1, 4),
    (10, 15, 3, 7, 8),
    (16, 32, 3, 1, 16),
    (20, 30, 5, 12345, 2),
    (32, 48, 7, 0x7FFFFFFE, 4),
    (50, 100, 10, 424242, 1),
    (100, 150, 3, 2026, 4),
]
RS_SETS: list[tuple[int, int, int]] = [
    (1, 3, 4),
    (4, 8, 4),
    (10, 14, 8),
    (32, 40, 3),
    (200, 256, 2),
]


def source_block(tag: str, size: int) -> bytes:
    """Deterministic pseudo-random source bytes for a vector named ``tag``."""
    return random.Random(tag).randbytes(size)


def ldpc_name(k: int, n: int, n1: int, seed: int, e: int) -> str:
    return f"ldpc-k{k}-n{n}-N1_{n1}-seed{seed}-E{e}"


def rs_name(k: int, n: int, e: int) -> str:
    return f"rs-k{k}-n{n}-E{e}"


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, cwd=Path(__file__).parent, timeout=5,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def ours() -> list[dict]:
    """Every vector computed now by our codecs (m2c.fec.ldpc, m2c.fec.rs)."""
    from m2c.fec import ldpc, rs

    out = []
    for k, n, n1, seed, e in LDPC_SETS:
        name = ldpc_name(k, n, n1, seed, e)
        src = source_block(name, k * e)
        rep = ldpc.encode(ldpc.LDPCParams(k=k, n=n, symbol_size=e, n1=n1, seed=seed), src)
        out.append({"name": name, "code": "ldpc", "k": k, "n": n, "n1": n1, "seed": seed, "E": e,
                    "source": src, "repair": rep})
    for k, n, e in RS_SETS:
        name = rs_name(k, n, e)
        src = source_block(name, k * e)
        rep = rs.encode(rs.RSParams(k, n, e), src)
        out.append(
            {"name": name, "code": "rs", "k": k, "n": n, "E": e, "source": src, "repair": rep}
        )
    return out


def format_vector(v: dict, source_note: str) -> str:
    lines = [f"# {v['name']}", f"# source: {source_note}"]
    if v["code"] == "ldpc":
        lines.append(
            "# RFC 5170 LDPC-Staircase: repair = ESI k..n-1"
            " (sec. 6.2 matrix, 5.7 PRNG, 6.3 encoding)"
        )
    else:
        lines.append(
            "# zfec-compatible RS over GF(2^8): repair = zfec.Encoder(k, n).encode(src, [k..n-1])"
        )
    for key in ("code", "k", "n", "n1", "seed", "E"):
        if key in v:
            lines.append(f"{key} {v[key]}")
    lines.append(f"source {v['source'].hex()}")
    lines.append(f"repair {v['repair'].hex()}")
    return "\n".join(lines) + "\n"


def export(directory: str | Path) -> list[Path]:
    """Write our vectors to ``directory`` (one ``.vec`` file each); returns the paths."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    command = "`python -m m2c.conformance.adapter export-vectors`"
    note = f"m2c.fec (this toolkit, commit {_commit()}), {command}"
    paths = []
    for v in ours():
        p = d / f"{v['name']}.vec"
        write_when_done(p, format_vector(v, note))
        paths.append(p)
    return paths


def parse(text: str) -> dict:
    """A vector file's fields (ints, bytes for source/repair, ``comments``)."""
    v: dict = {"comments": []}
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            v["comments"].append(line[1:].strip())
            continue
        key, _, val = line.partition(" ")
        val = val.strip()
        if key in ("source", "repair"):
            v[key] = bytes.fromhex(val)
        elif key == "code":
            v[key] = val
        else:
            v[key] = int(val)
    return v


def vectors_dir() -> Path | None:
    """The fec vector folder (see deliverykit.conformance.vectors_dir)."""
    return shared_vectors_dir("fec")


def load_all(directory: Path | None = None) -> list[tuple[str, dict]]:
    d = directory or vectors_dir()
    if d is None:
        return []
    return [(p.stem, parse(p.read_text())) for p in sorted(d.glob("*.vec"))]
