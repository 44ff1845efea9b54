"""The parts of a swift channel, each alone (no Peer): swift.core.channel and
swift.core.sendside (docs/swift-peer-state.md, "Per channel").

Each part owns its fields and the logic that only touches them; these tests
construct one part and check that logic's results, so a wrong rule in a part
fails here without a swarm around it.
"""

from __future__ import annotations

import pytest

from swift.core.binmap import Binmap
from swift.core.channel import (
    AnnounceState,
    Channel,
    DownloadSide,
    HandshakeState,
    Liveness,
    PathEstimate,
    PexState,
    RemoteHave,
    TuneInState,
    VerifyState,
)
from swift.core.picker import Availability
from swift.core.sendside import PACE_BURST, REO_MULT_MAX, REPAIR_FOR, SendSide
from swift.wire.codec import HandshakeOptions, supported_bitmap
from swift.wire.constants import MsgType

MSS = 1088


# -- HandshakeState ---------------------------------------------------------------


def test_handshake_backs_off_2_4_8_8_and_auto_tries_the_libswift_dialect_after_half_a_second(
) -> None:
    hs = HandshakeState(0.0)
    seen, auto = [], []
    for i in range(5):
        seen.append(hs.backoff(auto=False))
        auto.append(hs.backoff(auto=True))
        hs.sent(float(i), again=True)
    assert seen == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert auto == [1.0, 0.5, 4.0, 8.0, 8.0]
    assert hs.tries == 5 and hs.sent_at == 4.0 and hs.need
    hs.sent(5.0, again=False)
    assert not hs.need


def test_handshake_takes_what_the_supported_messages_option_lists_or_everything_without_one(
) -> None:
    hs = HandshakeState(0.0)
    assert hs.takes(MsgType.CANCEL)  # no HANDSHAKE from the peer yet
    hs.options = HandshakeOptions(supported=supported_bitmap({MsgType.DATA, MsgType.ACK}))
    assert hs.takes(MsgType.ACK) and not hs.takes(MsgType.CANCEL)
    assert hs.discard_window is None
    hs.options = HandshakeOptions(discard_window=1024)
    assert hs.discard_window == 1024 and hs.takes(MsgType.CANCEL)


# -- Liveness ---------------------------------------------------------------------


def test_liveness_is_dead_only_when_silent_and_three_datagrams_went_unanswered() -> None:
    lv = Liveness(0.0, 0.0)
    lv.spoke(1.0)
    lv.spoke(2.0)
    assert not lv.dead(100.0, 60.0)  # two sent: not yet
    lv.spoke(3.0)
    assert lv.dead(100.0, 60.0) and not lv.dead(50.0, 60.0)
    assert lv.last_send == 3.0
    lv.heard(99.0)
    assert lv.sent_since_recv == 0 and not lv.dead(100.0, 60.0)


# -- RemoteHave -------------------------------------------------------------------


def test_remote_have_counts_each_chunk_once_in_the_availability() -> None:
    avail = Availability()
    rh = RemoteHave()
    assert rh.add(0, 8, avail) and rh.some and rh.top == 8
    assert not rh.add(2, 6, avail)  # nothing new: libswift repeats its ACKs as HAVEs
    assert rh.add(4, 12, avail) and rh.top == 12
    assert [avail.count(c) for c in range(14)] == [1] * 12 + [0, 0]
    rh.withdraw(avail)
    assert [avail.count(c) for c in range(14)] == [0] * 14


def test_remote_have_keeps_only_the_discard_window_below_its_top() -> None:
    avail = Availability()
    rh = RemoteHave()
    rh.add(0, 100, avail, window=16)
    assert rh.have.find_filled(0) == 84 and rh.have.is_filled_range(84, 100)


# -- AnnounceState ----------------------------------------------------------------


def test_acks_merge_into_runs_with_the_delay_of_the_last_chunk_unless_single() -> None:
    st = AnnounceState()
    st.acks += [(5, 50), (3, 30), (4, 40), (9, 90)]
    assert st.take_acks(single=False) == [(3, 6, 50), (9, 10, 90)]
    assert st.acks == [] and st.take_acks(single=False) == []
    st.acks += [(4, 40), (3, 30)]
    assert st.take_acks(single=True) == [(3, 4, 30), (4, 5, 40)]


def test_announce_restart_forgets_what_was_announced() -> None:
    st = AnnounceState()
    st.announced.set_range(0, 10)
    st.version, st.pos = 7, 42
    st.restart()
    assert st.announced.find_filled(0) is None and st.version == -1 and st.pos == -1


# -- DownloadSide -----------------------------------------------------------------


def test_data_takes_back_requests_asked_more_than_one_before_it() -> None:
    d = DownloadSide(0.0)
    for c in (10, 11, 12, 13):
        d.ask(c, 1.0)
    assert d.skipped(13) == [10, 11]  # 12: within the reordering margin of one
    assert list(d.requests) == [12, 13] and 10 not in d.req_seq
    assert d.answered(13) == 1.0 and d.answered(13) is None
    assert d.skipped(12) == []  # first in line: nothing skipped
    d.drop(12)
    assert not d.requests and not d.req_seq


def test_answered_requests_move_the_head_and_the_lists_are_reused() -> None:
    d = DownloadSide(0.0)
    for c in range(600):
        d.ask(c, float(c))
    for c in range(512):
        d.answered(c)
    assert list(d.ends) == [512, 600]
    assert next(iter(d.requests)) == 512 and len(d.requests) == 88
    cap = len(d.chunk)
    for c in range(600, cap):  # asked and answered: free slots up to the end
        d.ask(c, float(c))
        d.answered(c)
    d.ask(cap, 1.0)  # past the end: the 88 move to the front, the lists keep their size
    assert len(d.chunk) == cap and list(d.ends) == [0, 89]
    assert list(d.requests) == [*range(512, 600), cap]


# -- PathEstimate -----------------------------------------------------------------


def test_path_estimate_smooths_rtt_and_dip_and_keeps_the_minimum() -> None:
    p = PathEstimate(0.0)
    p.note_data(1.0, 0.1)
    assert p.rtt == pytest.approx(0.875 * 0.5 + 0.125 * 0.1) and p.min_rtt == 0.1
    assert p.rtt_var == pytest.approx(0.25 * 0.4) and p.received == 1
    p.note_data(1.3, None)
    assert p.dip == pytest.approx(0.75 * 0.1 + 0.25 * 0.3)
    p.lost = 1
    assert p.loss_ratio == 0.5
    assert p.k == 1.0  # a stable link keeps k at its floor
    p.note_data(1.4, 5.0)  # the RTT jumps: its variation exceeds it, k grows (paper III-A)
    assert p.rtt_var > p.rtt and p.k == pytest.approx(1.01)


def test_path_window_grows_like_slow_start_until_a_rate_sample_saw_data() -> None:
    p = PathEstimate(0.0)
    p.min_rtt = 0.1  # plan: max(0.25 s, 4 min RTT, smoothed RTT 0.5 s) = 0.5 s
    assert p.window(1000) == 48  # no rate yet: 32 chunks per plan, x1.5
    p.received = 300
    assert p.window(1000) == 600 and p.window(400) == 400
    p.sample_rate(1.0)
    assert p.rate == 300.0 and p.rate_samples == 1 and p.rate_mark == (1.0, 300)
    assert p.window(1000) == 225  # 0.5 s x 300/s x 1.5, no slow start any more
    p.sample_rate(2.0)  # silent second: the rate halves, no new sample
    assert p.rate == 150.0 and p.rate_samples == 1


# -- VerifyState ------------------------------------------------------------------


def test_verify_keeps_hashes_of_bins_only_and_bounds_them() -> None:
    v = VerifyState()
    v.add_hash(4, 8, b"h")  # a bin
    v.add_hash(3, 6, b"x")  # not a bin: ignored
    assert list(v.hashes.values()) == [b"h"] and len(v.hash_order) == 1
    for _ in range(VerifyState.MAX_HASHES + 10):
        v.add_hash(0, 1, b"r")
    assert len(v.hash_order) == VerifyState.MAX_HASHES and len(v.hashes) == 2
    v.clear()
    assert not v.hashes and not v.hash_order and not v.sigs


def test_verify_drops_the_oldest_signature_never_the_newest() -> None:
    v = VerifyState()
    for c in range(VerifyState.MAX_SIGS + 1):
        v.add_sig(c, c + 1, c, b"s%d" % c)
    assert len(v.sigs) == VerifyState.MAX_SIGS
    assert (VerifyState.MAX_SIGS, b"s%d" % VerifyState.MAX_SIGS) in v.sigs.values()
    assert (0, b"s0") not in v.sigs.values()


def test_verify_blame_counts_and_distrusts() -> None:
    v = VerifyState()
    assert not v.distrusted
    assert v.blame() == 1 and v.blame() == 2 and v.distrusted


# -- SendSide ---------------------------------------------------------------------


def _sender() -> tuple[SendSide, Binmap]:
    have = Binmap()
    return SendSide(1000, MSS, False, have), have


def test_ack_retires_data_gives_rtt_and_moves_rack() -> None:
    s, _ = _sender()
    s.on_sent(1, 1100, 1.0)
    s.on_sent(2, 1100, 1.0)
    assert s.data_out[2] == (1.0, 1100, 2) and s.send_seq == 2 and s.served == 2200
    assert s.ledbat.flightsize == 2200
    assert s.on_ack(2, 3, 0, 1.05) == 0
    assert 2 not in s.data_out and s.acked_sent == 1.0 and s.acked_seq == 2
    assert s.acked_rtt == pytest.approx(0.05) and s.ledbat.flightsize == 1100
    assert s.rack_pending() and s.rack_due() == pytest.approx(1.0 + 0.05 + 0.25 * 0.05)


def test_rack_finds_the_earlier_data_lost_after_rtt_plus_a_quarter() -> None:
    s, peer_have = _sender()
    for c in (1, 2, 3):
        s.on_sent(c, 1100, 1.0)
    s.on_ack(3, 4, 0, 1.04)
    due = s.rack_due()
    assert due is not None
    assert s.detect_losses(due - 0.001, peer_have) == []  # not overdue yet
    peer_have.add(2)  # announced by HAVE: it arrived
    assert s.detect_losses(due + 0.001, peer_have) == [1]
    assert not s.data_out and s.reo_clean == 1
    assert not s.sent.has(1) and s.sent.has(2)  # its hashes may not have arrived


def test_a_chunk_resent_and_acknowledged_young_doubles_the_reordering_window() -> None:
    s, peer_have = _sender()
    have = Binmap()
    have.set_range(0, 10)
    assert s.requeue([4, 5], have, peer_have, 1.0) == 2
    assert s.upload.pop() == 4 and s.resent == 2
    assert s.requeue([4], have, peer_have, 1.5) == 1  # lost again: repaired again ...
    assert s.upload.pop() == 4
    assert s.requeue([4], have, peer_have, 1.0 + REPAIR_FOR + 0.01) == 0  # ... for REPAIR_FOR
    assert s.retried == {5} and 4 not in s.lost_at
    s.retried.add(4)
    assert s.spurious(4, 5, 1.0) == 1 and s.reo_mult == 2 and s.reo_clean == 0
    s.reo_mult = REO_MULT_MAX
    s.retried.add(4)
    s.spurious(4, 5, 1.0)
    assert s.reo_mult == REO_MULT_MAX


def test_tail_probe_backs_off_and_probes_with_new_data_first() -> None:
    s, _ = _sender()
    s.on_sent(1, 1100, 0.0)
    s.on_sent(2, 1100, 0.0)
    s.on_ack(1, 2, 0, 0.1)  # srtt 0.1, last ACK at 0.1
    assert not s.tail_probe(0.25)  # 2 RTT not passed
    assert s.tail_probe(0.31) and s.probes == 1
    assert not s.tail_probe(0.5)  # backed off: 4 RTT from the probe
    assert s.probe_chunk() == 2 and 2 not in s.data_out  # nothing queued: the newest again
    s.upload.push(7, 8)
    assert s.tail_probe(0.75) and s.probe_chunk() is None and s.probe_credit


def test_pacing_lets_a_burst_go_then_spaces_data_by_the_window_over_one_rtt() -> None:
    s, _ = _sender()
    s.on_sent(0, 1100, 0.0)
    assert s.pace_at == 0.0  # no RTT yet: no pacing
    s.ledbat.srtt, s.ledbat.cwnd = 0.1, 100_000  # 1 us per byte
    n = PACE_BURST // 1100  # what fits in the burst leaves at once
    for c in range(1, n + 1):
        s.on_sent(c, 1100, 1.0)
    assert s.pace_at <= 1.0
    s.on_sent(n + 1, 1100, 1.0)
    assert s.pace_at == pytest.approx(1.0 - PACE_BURST * 1e-6 + (n + 1) * 1100 * 1e-6)
    assert s.pace_at > 1.0


def test_choke_clears_the_queue_once_and_says_so() -> None:
    s, _ = _sender()
    s.upload.push(0, 10)
    s.choke()
    assert s.choking and s.send_choke is True and len(s.upload) == 0
    s.send_choke = None
    s.choke()
    assert s.send_choke is None


# -- PexState, TuneInState, Channel -------------------------------------------------


def test_pex_answers_are_expected_only_shortly_after_our_request() -> None:
    p = PexState()
    assert not p.answer_expected(1.0, 5.0)
    p.asked = 10.0
    assert p.answer_expected(15.0, 5.0) and not p.answer_expected(15.1, 5.0)


def test_tune_in_pushes_until_the_peer_is_past_the_first_munro() -> None:
    t = TuneInState()
    assert t.due(64, 0, 1.0, alone=True) and t.pushed == (64, 1.0)
    assert not t.due(128, 0, 1.5, alone=True)  # alone: once a second
    assert t.due(128, 0, 1.5, alone=False) and t.pushed == (64, 1.5)  # first munro kept
    assert not t.due(128, 65, 3.0, alone=False) and t.done


def test_a_channel_holds_one_part_per_owner_and_nothing_else() -> None:
    ch = Channel(7, ("127.0.0.1", 1), True, 2.0, MSS, 100, True, ledbat_target=0.1)
    assert ch.hs.opened_at == 2.0 and ch.down.last_progress == 2.0
    assert ch.send.ledbat.TARGET == 0.1 and ch.send.upload.limit == 100
    # what the peer holds or was sent: the sender's view of the remote's binmap
    ch.remote.add(0, 4, Availability())
    assert ch.send.known.find_filled(0, 10) == 0 and ch.send.known.find_filled(4, 10) is None
    ch.send.on_sent(6, 1100, 3.0)
    assert ch.send.known.find_filled(4, 10) == 6
    with pytest.raises(AttributeError):
        ch.requests = {}  # type: ignore[attr-defined]  # moved to ch.down
