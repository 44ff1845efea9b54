"""The HTTP cases' own client pieces, against real servers (our origin, nginx)."""

from __future__ import annotations

import pytest

from vmc.conformance.harness import body_slice, expected, fetch, multipart_parts, origin


@pytest.mark.tool("nginx")
def test_multipart_byteranges_parser_on_nginx(tmp_path):
    """nginx answers two ranges of a static file with multipart/byteranges: every part parses
    exactly."""
    from vmc.nginx import Nginx, write_object

    write_object(tmp_path, "obj.bin", 200_000)
    with Nginx.origin(tmp_path) as ng:
        r = fetch(("127.0.0.1", ng.port), "/obj.bin", [("range", "bytes=0-9,5000-5099,-7")],
                  timeout=10)
    assert r.status == 206 and r.headers["content-type"].startswith("multipart/byteranges")
    parts = multipart_parts(r)
    assert [(a, b) for a, b, _, _ in parts] == [(0, 9), (5000, 5099), (199_993, 199_999)]
    for a, b, complete, body in parts:
        assert complete == 200_000 and body == body_slice("/obj.bin", a, b + 1)


def test_fetch_tells_complete_from_cut():
    """Our origin aborting mid-body gives complete=False; a whole body gives complete=True."""
    with origin() as o:
        ok = fetch(o.addr, "/h/x.bin?size=50000", timeout=10)
        cut = fetch(o.addr, "/h/y.bin?size=50000&fail_at=20000", timeout=10)
        st = o.stats()
    assert ok.complete and ok.body == expected("/h/x.bin", 50000)
    assert not cut.complete and cut.status == 200 and len(cut.body) == 20000
    assert st["requests"] == 2
