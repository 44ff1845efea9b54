"""One typed view of a swarm's content (``swift.core.content.ContentView``).

The Peer, ``RequestScheduler``, ``UploadScheduler`` and ``Verifier`` each used
to test the content's class in their constructors; they now share the one
view the Peer makes, so the live/static split is decided in one place.
"""

from __future__ import annotations

import pytest

from swift.core.config import PeerConfig
from swift.core.content import Content, ContentView, MemoryStorage
from swift.core.live import LiveContent, LiveTree
from swift.core.peer import Peer
from tests.swift.swift_support import make_tree


def _static() -> Content:
    cfg = PeerConfig()
    data = bytes(range(256)) * 40
    return Content.seeded(make_tree(data, cfg), MemoryStorage(data))


def _live() -> LiveContent:
    return LiveContent(LiveTree.source(per_sig=4, chunk_size=1024), window=256)


def test_the_view_names_the_one_kind_the_content_is() -> None:
    static, live = _static(), _live()
    s, lv = ContentView.of(static), ContentView.of(live)
    assert (s.content, s.static, s.live, s.is_live) == (static, static, None, False)
    assert (lv.content, lv.static, lv.live, lv.is_live) == (live, None, live, True)
    assert ContentView.of(s) is s  # a view is its own view


@pytest.mark.parametrize("kind", ["static", "live"])
def test_the_peer_and_its_components_share_one_view(kind: str) -> None:
    content = _static() if kind == "static" else _live()
    peer = Peer(content, PeerConfig(seed=1))
    view = peer.view
    assert view.content is content and peer.content is content
    assert peer.download.view is view and peer.upload.view is view
    assert peer.verifier.view is view
    assert peer.download.content is content and peer.upload.content is content
    assert peer.live == (kind == "live")
    assert peer.live_content is (content if kind == "live" else None)


def test_a_peer_refuses_content_of_neither_kind() -> None:
    class Other:
        tree = make_tree(bytes(1024), PeerConfig())

    with pytest.raises(TypeError, match="Content or LiveContent"):
        Peer(Other(), PeerConfig())  # type: ignore[arg-type]  # wrong type on purpose
