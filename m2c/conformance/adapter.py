"""Our FEC implementation behind the conformance contract (see ``m2c.conformance``).

    python -m m2c.conformance.adapter encode ldpc K N N1 SEED E  < source > repair
    python -m m2c.conformance.adapter decode rs K N E            < records > source
    python -m m2c.conformance.adapter groups ldpc K N N1 SEED G  > one line of ESIs per packet
    python -m m2c.conformance.adapter export-vectors DIR

Exit 0 done, 1 undecodable, 2 bad usage or parameters, 127 unsupported.
"""

from __future__ import annotations

import struct
import sys

USAGE = __doc__ or ""


def _read_records(data: bytes, e: int) -> list[tuple[int, bytes]]:
    rec = 4 + e
    if len(data) % rec:
        raise ValueError(f"stdin is {len(data)} bytes, not a whole number of {rec}-byte records")
    return [(struct.unpack_from(">I", data, i)[0], data[i + 4:i + rec])
            for i in range(0, len(data), rec)]


def _params(code: str, nums: list[int]):
    from m2c.fec import ldpc, rs

    if code == "ldpc":
        k, n, n1, seed, e = nums
        return ldpc, ldpc.LDPCParams(k=k, n=n, symbol_size=e, n1=n1, seed=seed), e
    k, n, e = nums
    return rs, rs.RSParams(k, n, e), e


def groups(k: int, n: int, n1: int, seed: int, g: int) -> list[list[int]]:
    """The encoding symbol groups of one block with G symbols per packet (RFC 5170 sec. 5.6,
    as we read it): source packets hold consecutive ESIs; repair packets hold G repair symbols
    consecutive in the transmission order of the txseqToID table, whose PRNG continues right
    after the matrix (sec. 5.7)."""
    from m2c.fec import ldpc

    if g < 1 or k % g or (n - k) % g:
        raise ValueError(f"K={k} and N-K={n - k} must be multiples of G={g}")
    tx_to_id, _ = ldpc.esi_tables(ldpc.LDPCParams(k=k, n=n, symbol_size=1, n1=n1, seed=seed))
    out = [list(range(s, s + g)) for s in range(0, k, g)]
    out += [[k + tx_to_id[t + j] for j in range(g)] for t in range(0, n - k, g)]
    return out


def _groups(args: list[str]) -> int:
    if not args or args[0] != "ldpc":
        return 127
    try:
        nums = [int(a) for a in args[1:]]
        if len(nums) != 5:
            raise ValueError("groups ldpc takes K N N1 SEED G")
        lines = groups(*nums)
    except ValueError as exc:
        print(f"adapter: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write("".join(" ".join(map(str, line)) + "\n" for line in lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        sys.stderr.write(USAGE)
        return 2
    role = args[0]
    if role in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    if role == "export-vectors" and len(args) == 2:
        from m2c.conformance.vectors import export

        for p in export(args[1]):
            print(p)
        return 0
    if role == "groups":
        return _groups(args[1:])
    if role not in ("encode", "decode"):
        return 127
    if len(args) < 2 or args[1] not in ("ldpc", "rs"):
        return 127  # a code we do not implement
    code = args[1]
    want = 5 if code == "ldpc" else 3
    try:
        nums = [int(a) for a in args[2:]]
        if len(nums) != want:
            raise ValueError(f"{code} takes {want} numbers")
        from m2c.fec.errors import FECError

        mod, params, e = _params(code, nums)
    except (ValueError, FECError) as exc:  # FECError is a ValueError too
        print(f"adapter: {exc}", file=sys.stderr)
        return 2
    data = sys.stdin.buffer.read()
    try:
        if role == "encode":
            out = mod.encode(params, data)
        else:
            pairs = _read_records(data, e)
            for esi, _ in pairs:
                if not 0 <= esi < params.n:
                    raise ValueError(f"ESI {esi} out of range")
            # duplicates are allowed by the contract: keep the first copy
            seen: dict[int, bytes] = {}
            for esi, sym in pairs:
                seen.setdefault(esi, sym)
            out = mod.decode(params, seen)
            if out is None:
                print("adapter: not enough symbols to decode", file=sys.stderr)
                return 1
    except ValueError as exc:
        print(f"adapter: {exc}", file=sys.stderr)
        return 2
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
