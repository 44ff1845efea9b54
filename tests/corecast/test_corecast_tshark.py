"""Tshark's built-in `lisp` and `lisp-data` dissectors read our packets as we meant them.

Our codec writes LISP data and control packets; scapy's wrpcap puts them in a
pcap; tshark 4 decodes every field, which must equal what we set.
"""

from __future__ import annotations

import ipaddress
import subprocess

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from corecast.wire import codec as c

A = ipaddress.ip_address
N = ipaddress.ip_network

pytestmark = pytest.mark.tool("tshark")


def ETH():
    """Fixed MACs: scapy would otherwise ARP for every destination while building."""
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")


def fields(pcap, frame: int, names: list[str]) -> dict[str, list[str]]:
    cmd = ["tshark", "-r", str(pcap), "-Y", f"frame.number=={frame}", "-T", "fields",
           "-E", "aggregator=|"]
    for n in names:
        cmd += ["-e", n]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout
    line = out.rstrip("\n").split("\t")
    assert len(line) == len(names), out
    return {n: (v.split("|") if v else []) for n, v in zip(names, line)}


def _ctl(b: bytes, sport: int = 61001, dport: int = 4342):
    return ETH() / IP(src="192.0.2.1", dst="192.0.2.9") / UDP(sport=sport, dport=dport) / b


@pytest.fixture(scope="module")
def pcap(tmp_path_factory):
    inner = c.build_ipv4(bytes([10, 1, 0, 1]), bytes([10, 255, 0, 1]), 17, c.build_udp(
        54341, 54341, c.encode_cc_header(3, b"\x11" * 20, bytes([10, 2, 0, 7]), 5004)))
    mr = c.MapRequest(0x1122334455667788, (A("192.0.2.1"), A("2001:db8::1")),
                      (N("10.2.0.7/32"),), A("10.1.0.1"), authoritative=True, smr=True,
                      pitr=True)
    rec = c.EidRecord(N("10.2.0.0/16"), (
        c.LocatorRecord(A("192.0.2.2"), 1, 60, 255, 0, True, False, True),
        c.LocatorRecord(A("2001:db8::2"), 2, 40, 10, 5, False, True, False)), 1440, 0, True, 7)
    neg = c.EidRecord(N("2001:db8:5::/48"), (), 15, 1)
    reg = c.MapRegister(42, (rec,), 1, 2, proxy_reply=True, want_map_notify=True,
                        xtr_id=b"\xaa" * 16, site_id=b"\xbb" * 8)
    notify = c.MapRegister(42, (rec,), 1, 1, msg_type=4, xtr_id=b"\xcc" * 16, site_id=b"\xdd" * 8,
                           rtr=True)
    signed_reg = c.sign(reg, b"k")
    signed_notify = c.sign(notify, b"k")
    pk = [
        ETH() / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=61000, dport=4341) / (
            c.encode_lisp_data(c.make_lisp_data(nonce=0xABCDEF, instance_id=77, lsb=3)) + inner),
        ETH() / IP(src="192.0.2.2", dst="192.0.2.1") / UDP(sport=4341, dport=61000) / (
            c.encode_lisp_data(c.make_lisp_data(map_versions=(5, 4000), lsb=0x80000001)) + inner),
        _ctl(c.encode_map_request(mr)),
        _ctl(c.encode_map_reply(c.MapReply(0x1122334455667788, (rec, neg), probe=True)),
             4342, 61001),
        _ctl(signed_reg),
        _ctl(signed_notify, 4342, 4342),
        _ctl(c.ecm_wrap(c.encode_map_request(mr), bytes([192, 0, 2, 1]), bytes([10, 2, 0, 7]),
                        61001)),
    ]
    path = tmp_path_factory.mktemp("tshark") / "corecast-lisp.pcap"
    wrpcap(str(path), pk)
    return path, c.decode_control(signed_reg).auth_data, c.decode_control(signed_notify).auth_data


def test_lisp_data_nonce_iid_lsb(pcap):
    f = fields(pcap[0], 1, ["lisp-data.flags.nonce", "lisp-data.flags.lsb", "lisp-data.flags.enr",
                            "lisp-data.flags.mv", "lisp-data.flags.iid", "lisp-data.nonce",
                            "lisp-data.iid", "lisp-data.lsb8", "ip.dst", "udp.dstport"])
    assert f["lisp-data.flags.nonce"] == ["1"] and f["lisp-data.flags.lsb"] == ["1"]
    assert f["lisp-data.flags.enr"] == ["0"] and f["lisp-data.flags.mv"] == ["0"]
    assert f["lisp-data.flags.iid"] == ["1"]
    assert int(f["lisp-data.nonce"][0], 0) == 0xABCDEF
    assert f["lisp-data.iid"] == ["77"] and int(f["lisp-data.lsb8"][0], 16) == 3
    # the inner header is dissected after ours: destination is the channel EID
    assert f["ip.dst"] == ["192.0.2.2", "10.255.0.1"]


def test_lisp_data_map_versions_and_reverse_port(pcap):
    f = fields(pcap[0], 2, ["lisp-data.flags.mv", "lisp-data.srcmapver", "lisp-data.dstmapver",
                            "lisp-data.lsb"])
    assert f["lisp-data.flags.mv"] == ["1"]
    assert f["lisp-data.srcmapver"] == ["5"] and f["lisp-data.dstmapver"] == ["4000"]
    assert int(f["lisp-data.lsb"][0], 16) == 0x80000001


def test_map_request(pcap):
    f = fields(pcap[0], 3, ["lisp.type", "lisp.irc", "lisp.records", "lisp.nonce",
                            "lisp.mreq.flags.auth", "lisp.mreq.flags.mrp",
                            "lisp.mreq.flags.probe", "lisp.mreq.flags.smr",
                            "lisp.mreq.flags.pitr", "lisp.mreq.flags.smri",
                            "lisp.mreq.srceid.afi", "lisp.mreq.srceid.ipv4",
                            "lisp.mreq.itr_rloc.afi", "lisp.mreq.itr_rloc_ipv4",
                            "lisp.mreq.itr_rloc_ipv6", "lisp.mreq.record.prefix.length",
                            "lisp.mreq.record.prefix.afi", "lisp.mreq.record.prefix.ipv4"])
    assert f["lisp.type"] == ["1"]
    assert f["lisp.irc"] == ["1"]  # two ITR-RLOCs, encoded as count - 1
    assert f["lisp.records"] == ["1"]
    assert int(f["lisp.nonce"][0], 16) == 0x1122334455667788
    assert [f[k][0] for k in ("lisp.mreq.flags.auth", "lisp.mreq.flags.mrp",
                              "lisp.mreq.flags.probe", "lisp.mreq.flags.smr",
                              "lisp.mreq.flags.pitr", "lisp.mreq.flags.smri")] == [
        "1", "0", "0", "1", "1", "0"]
    assert f["lisp.mreq.srceid.afi"] == ["1"] and f["lisp.mreq.srceid.ipv4"] == ["10.1.0.1"]
    assert f["lisp.mreq.itr_rloc.afi"] == ["1", "2"]
    assert f["lisp.mreq.itr_rloc_ipv4"] == ["192.0.2.1"]
    assert f["lisp.mreq.itr_rloc_ipv6"] == ["2001:db8::1"]
    assert f["lisp.mreq.record.prefix.length"] == ["32"]
    assert f["lisp.mreq.record.prefix.afi"] == ["1"]
    assert f["lisp.mreq.record.prefix.ipv4"] == ["10.2.0.7"]


RECORD_FIELDS = ["lisp.mapping.ttl", "lisp.mapping.loccnt", "lisp.mapping.eid.masklen",
                 "lisp.mapping.act", "lisp.mapping.auth", "lisp.mapping.ver",
                 "lisp.mapping.eid.afi", "lisp.mapping.eid.ipv4", "lisp.mapping.eid.ipv6",
                 "lisp.loc.priority", "lisp.loc.weight", "lisp.loc.multicast_priority",
                 "lisp.loc.multicast_weight", "lisp.loc.flags.local", "lisp.loc.flags.probe",
                 "lisp.loc.flags.reach", "lisp.loc.afi", "lisp.loc.locator"]


def _check_record(f, with_negative: bool):
    ttl = ["1440", "15"] if with_negative else ["1440"]
    assert f["lisp.mapping.ttl"] == ttl
    assert f["lisp.mapping.loccnt"] == (["2", "0"] if with_negative else ["2"])
    assert f["lisp.mapping.eid.masklen"] == (["16", "48"] if with_negative else ["16"])
    assert f["lisp.mapping.act"] == (["0", "1"] if with_negative else ["0"])
    assert f["lisp.mapping.auth"][0] == "1"
    assert f["lisp.mapping.ver"][0] == "7"
    assert f["lisp.mapping.eid.ipv4"] == ["10.2.0.0"]
    if with_negative:
        assert f["lisp.mapping.eid.ipv6"] == ["2001:db8:5::"]
        assert f["lisp.mapping.eid.afi"] == ["1", "2"]
    assert f["lisp.loc.priority"] == ["1", "2"] and f["lisp.loc.weight"] == ["60", "40"]
    assert f["lisp.loc.multicast_priority"] == ["255", "10"]
    assert f["lisp.loc.multicast_weight"] == ["0", "5"]
    assert f["lisp.loc.flags.local"] == ["1", "0"]
    assert f["lisp.loc.flags.probe"] == ["0", "1"]
    assert f["lisp.loc.flags.reach"] == ["1", "0"]
    assert f["lisp.loc.afi"] == ["1", "2"]
    assert f["lisp.loc.locator"] == ["192.0.2.2", "2001:db8::2"]


def test_map_reply_records_and_locators(pcap):
    f = fields(pcap[0], 4, ["lisp.type", "lisp.records", "lisp.nonce", "lisp.mrep.flags.probe",
                            "lisp.mrep.flags.enlr", "lisp.mrep.flags.sec"] + RECORD_FIELDS)
    assert f["lisp.type"] == ["2"] and f["lisp.records"] == ["2"]
    assert int(f["lisp.nonce"][0], 16) == 0x1122334455667788
    assert (f["lisp.mrep.flags.probe"], f["lisp.mrep.flags.enlr"], f["lisp.mrep.flags.sec"]) == (
        ["1"], ["0"], ["0"])
    _check_record(f, with_negative=True)


def test_map_register_auth_and_ids(pcap):
    path, auth, _ = pcap
    f = fields(path, 5, ["lisp.type", "lisp.records", "lisp.nonce", "lisp.mreg.flags.pmr",
                         "lisp.mreg.flags.sec", "lisp.mreg.flags.xtrid", "lisp.mreg.flags.wmn",
                         "lisp.keyid", "lisp.authlen", "lisp.auth", "lisp.xtrid",
                         "lisp.siteid"] + RECORD_FIELDS)
    assert f["lisp.type"] == ["3"] and f["lisp.records"] == ["1"]
    assert int(f["lisp.nonce"][0], 16) == 42
    assert [f[k][0] for k in ("lisp.mreg.flags.pmr", "lisp.mreg.flags.sec",
                              "lisp.mreg.flags.xtrid", "lisp.mreg.flags.wmn")] == [
        "1", "0", "1", "1"]
    # tshark 4.0 still reads RFC 6833's 16-bit Key ID: our Key ID 1, Algorithm ID 2
    assert int(f["lisp.keyid"][0], 16) == 0x0102
    assert f["lisp.authlen"] == ["16"]  # HMAC-SHA-256-128
    assert bytes.fromhex(f["lisp.auth"][0]) == auth
    assert f["lisp.xtrid"] == ["aa" * 16] and f["lisp.siteid"] == ["bb" * 8]
    _check_record(f, with_negative=False)


def test_map_notify(pcap):
    path, _, auth = pcap
    f = fields(path, 6, ["lisp.type", "lisp.nonce", "lisp.mnot.flags.xtrid", "lisp.keyid",
                         "lisp.authlen", "lisp.auth", "lisp.xtrid", "lisp.siteid",
                         "lisp.mnot.flags.rtr"])
    assert f["lisp.type"] == ["4"] and int(f["lisp.nonce"][0], 16) == 42
    assert f["lisp.mnot.flags.xtrid"] == ["1"]
    assert f["lisp.mnot.flags.rtr"] == ["1"]  # the R bit we set, where tshark reads it
    assert int(f["lisp.keyid"][0], 16) == 0x0101 and f["lisp.authlen"] == ["12"]
    assert bytes.fromhex(f["lisp.auth"][0]) == auth
    assert f["lisp.xtrid"] == ["cc" * 16] and f["lisp.siteid"] == ["dd" * 8]


def test_ecm_wraps_map_request(pcap):
    f = fields(pcap[0], 7, ["lisp.type", "lisp.ecm.flags.sec", "lisp.ecm.flags.ddt", "ip.dst",
                            "udp.dstport", "lisp.mreq.record.prefix.ipv4"])
    assert f["lisp.type"] == ["8", "1"]
    assert f["lisp.ecm.flags.sec"] == ["0"] and f["lisp.ecm.flags.ddt"] == ["0"]
    assert f["ip.dst"] == ["192.0.2.9", "10.2.0.7"]
    assert f["udp.dstport"] == ["4342", "4342"]
    assert f["lisp.mreq.record.prefix.ipv4"] == ["10.2.0.7"]


def test_lcaf_instance_id_in_register_and_request(tmp_path):
    """RFC 8060 sec. 4.1: EID records and Map-Request prefixes of instance 0xABCDE (and an
    IPv6 EID of instance 7) as LCAF Instance ID addresses; tshark reads type 2, the
    length, the Instance ID and the address we wrote."""
    rec = c.EidRecord(N("10.7.0.0/16"), (c.LocatorRecord(A("192.0.2.2")),), 3, iid=0xABCDE)
    rec6 = c.EidRecord(N("2001:db8:7::/48"), (c.LocatorRecord(A("192.0.2.3")),), 3, iid=7)
    reg = c.sign(c.MapRegister(9, (rec, rec6), 1, 2, proxy_reply=True), b"k")
    mr = c.MapRequest(5, (A("192.0.2.1"),), (N("10.7.1.1/32"),), eid_iids=(0xABCDE,))
    path = tmp_path / "lcaf.pcap"
    wrpcap(str(path), [_ctl(reg), _ctl(c.encode_map_request(mr))])
    names = ["lisp.lcaf.type", "lisp.lcaf.length", "lisp.lcaf.iid", "lisp.lcaf.iid.afi",
             "lisp.lcaf.iid.ipv4", "lisp.lcaf.iid.ipv6"]
    f = fields(path, 1, names)
    assert f["lisp.lcaf.type"] == ["2", "2"]
    assert f["lisp.lcaf.length"] == ["10", "22"]
    assert [int(x, 0) for x in f["lisp.lcaf.iid"]] == [0xABCDE, 7]
    assert f["lisp.lcaf.iid.afi"] == ["1", "2"]
    assert f["lisp.lcaf.iid.ipv4"] == ["10.7.0.0"] and f["lisp.lcaf.iid.ipv6"] == ["2001:db8:7::"]
    g = fields(path, 2, names)
    assert [int(x, 0) for x in g["lisp.lcaf.iid"]] == [0xABCDE]
    assert g["lisp.lcaf.iid.ipv4"] == ["10.7.1.1"]
