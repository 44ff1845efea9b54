"""Testbed topology, execution and cleanup, on real namespaces (root)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from deliverykit.testbed import (
    RemoteError,
    RemoteTraceback,
    Testbed,
    TestbedError,
    TestbedTimeout,
    cleanup_stale,
)

NETNS_DIR = "/var/run/netns"


def namespaces(prefix: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(NETNS_DIR) if n.startswith(prefix))
    except FileNotFoundError:
        return []


def udp_echo(ready, port: int, count: int, family: int = socket.AF_INET) -> int:
    """Echo up to ``count`` datagrams; returns how many were echoed (5 s idle timeout)."""
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", port))
    s.settimeout(5.0)
    ready.set()
    n = 0
    try:
        while n < count:
            data, peer = s.recvfrom(2048)
            s.sendto(data, peer)
            n += 1
    except TimeoutError:
        pass
    return n


def udp_ping(dst: str, port: int, count: int, family: int = socket.AF_INET) -> int:
    """Send ``count`` numbered datagrams one at a time; returns how many came back."""
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    got = 0
    for i in range(count):
        s.sendto(i.to_bytes(4, "big"), (dst, port))
        try:
            data, _ = s.recvfrom(2048)
        except TimeoutError:
            continue
        got += int.from_bytes(data[:4], "big") == i
    return got


def line(tb: Testbed):
    a, r, b = tb.host("a"), tb.host("r", forwarding=True), tb.host("b")
    l1 = tb.link(a, r, "10.0.1.1/24", "10.0.1.2/24")
    l2 = tb.link(r, b, "10.0.2.1/24", "10.0.2.2/24")
    tb.address(a, l1.a, "fd00:1::1/64")
    tb.address(r, l1.b, "fd00:1::2/64")
    tb.address(r, l2.a, "fd00:2::1/64")
    tb.address(b, l2.b, "fd00:2::2/64")
    tb.route(a, "default", via="10.0.1.2")
    tb.route(b, "default", via="10.0.2.1")
    tb.route(a, "default", via="fd00:1::2")
    tb.route(b, "fd00:1::/64", via="fd00:2::1")
    return a, r, b, l1, l2


@pytest.mark.root
def test_three_host_line_forwards_ipv4_and_ipv6() -> None:
    with Testbed() as tb:
        a, r, b, l1, l2 = line(tb)
        ready = tb.event()
        echo = tb.spawn(b, udp_echo, ready, 7000, 20)
        assert ready.wait(10)
        assert tb.run(a, udp_ping, "10.0.2.2", 7000, 10) == 10
        ready6 = tb.event()
        echo6 = tb.spawn(b, udp_echo, ready6, 7001, 5, socket.AF_INET6)
        assert ready6.wait(10)
        assert tb.run(a, udp_ping, "fd00:2::2", 7001, 5, socket.AF_INET6) == 5
        # r really forwarded them: its interface toward b sent at least the 15 requests
        assert tb.counters(r, l2.a)["tx_packets"] >= 15
        # and without forwarding on r nothing gets through (the test can fail)
        tb.sysctl(r, "net.ipv4.ip_forward", 0)
        assert tb.run(a, udp_ping, "10.0.2.2", 7000, 1) == 0
        echo.kill()
        assert echo6.result(10) == 5


@pytest.mark.root
def test_interface_names_and_ends() -> None:
    with Testbed() as tb:
        a, b = tb.host("a"), tb.host("b")
        l1 = tb.link(a, b, "10.0.1.1/24", "10.0.1.2/24")
        l2 = tb.link(a, b)
        names = (l1.a.ifname, l1.b.ifname, l2.a.ifname, l2.b.ifname)
        assert names == ("to-b", "to-a", "to-b1", "to-a1")
        assert l1.end(b) == l1.b and l1.ends == (l1.a, l1.b) and l1.a.ip == "10.0.1.1"
        assert tb.ifaces(a) == ["lo", "to-b", "to-b1"]
        # run() really executes inside the namespace: the child sees a's interfaces
        names = tb.run(a, lambda: sorted(n for _, n in socket.if_nameindex()))
        assert names == ["lo", "to-b", "to-b1"]
        with pytest.raises(TestbedError):
            tb.host("a")
        with pytest.raises(TestbedError):
            tb.host("Bad-Name")


def boom(msg: str) -> None:
    raise ValueError(msg)


async def async_double(x: int) -> int:
    await asyncio.sleep(0.01)
    return 2 * x


class Unpicklable(Exception):
    def __init__(self) -> None:
        super().__init__("unpicklable")
        self.lock = threading.Lock()


def raise_unpicklable() -> None:
    raise Unpicklable()


@pytest.mark.root
def test_run_returns_raises_and_times_out() -> None:
    with Testbed() as tb:
        a = tb.host("a")
        assert tb.run(a, lambda x, y=1: {"sum": x + y}, 2, y=3) == {"sum": 5}
        assert tb.run(a, async_double, 21) == 42
        with pytest.raises(ValueError, match="kaput") as info:
            tb.run(a, boom, "kaput")
        assert isinstance(info.value.__cause__, RemoteTraceback)
        assert "in boom" in info.value.__cause__.text
        with pytest.raises(RemoteError, match="Unpicklable: unpicklable"):
            tb.run(a, raise_unpicklable)
        task = tb.spawn(a, time.sleep, 30)
        with pytest.raises(TestbedTimeout):
            task.result(timeout=0.5)
        assert not task.alive
        with pytest.raises(TestbedTimeout):
            tb.run(a, time.sleep, 30, timeout=0.5)


@pytest.mark.root
def test_exec_and_popen_run_in_the_namespace() -> None:
    with Testbed() as tb:
        a = tb.host("a")
        cp = tb.exec(a, ["ip", "-o", "link", "show"])
        assert cp.returncode == 0 and "lo" in cp.stdout and "eth" not in cp.stdout
        proc = tb.popen(a, ["sleep", "60"])
        assert proc.poll() is None
    assert proc.returncode is not None  # terminated and reaped by close()


@pytest.mark.root
def test_cleanup_after_exception_leaves_nothing() -> None:
    with pytest.raises(RuntimeError, match="inside"):
        with Testbed(prefix="dkt") as tb:
            a, r, b, l1, l2 = line(tb)
            lan = tb.bridge("lan")
            tb.attach(b, lan, "10.0.3.1/24")
            proc = tb.popen(a, ["sleep", "60"])
            task = tb.spawn(b, time.sleep, 60)
            run_id = tb.run_id
            assert len(namespaces(run_id)) == 4
            raise RuntimeError("inside")
    assert namespaces(run_id) == []
    assert proc.returncode is not None and not task.alive
    # nothing was ever created in the root namespace
    assert "to-r" not in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout


@pytest.mark.root
def test_cleanup_after_keyboard_interrupt() -> None:
    with pytest.raises(KeyboardInterrupt):
        with Testbed(prefix="dkt") as tb:
            tb.link(tb.host("a"), tb.host("b"))
            run_id = tb.run_id
            raise KeyboardInterrupt
    assert namespaces(run_id) == []


@pytest.mark.root
def test_sigterm_cleans_up(tmp_path) -> None:
    script = tmp_path / "victim.py"
    script.write_text(textwrap.dedent("""
        import sys, time
        from deliverykit.testbed import Testbed
        with Testbed(prefix="dkt") as tb:
            tb.link(tb.host("a"), tb.host("b"))
            print(tb.run_id, flush=True)
            time.sleep(60)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        run_id = proc.stdout.readline().strip()
        assert run_id.startswith("dkt-") and len(namespaces(run_id)) == 2
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    assert namespaces(run_id) == []


@pytest.mark.root
def test_parallel_testbeds_do_not_clash_and_cleanup_stale() -> None:
    with Testbed(prefix="dkt") as one, Testbed(prefix="dkt") as two:
        for tb in (one, two):
            tb.link(tb.host("a"), tb.host("b"), "10.0.1.1/24", "10.0.1.2/24")
        assert one.run_id != two.run_id
        # a namespace left by a dead run is removed, live runs are kept
        dead = subprocess.Popen(["true"])
        dead.wait()
        stale = f"dkt-{dead.pid}-beef-a"
        subprocess.run(["ip", "netns", "add", stale], check=True)
        try:
            assert cleanup_stale("dkt") == [stale]
            assert len(namespaces(one.run_id)) == 2 and len(namespaces(two.run_id)) == 2
        finally:
            if namespaces(stale):
                subprocess.run(["ip", "netns", "del", stale])


@pytest.mark.root
def test_without_root_one_clear_error() -> None:
    """A forked child that drops to nobody gets TestbedError('needs root ...')."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            os.close(rfd)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            try:
                Testbed()
                code = 1
            except TestbedError as exc:
                os.write(wfd, str(exc).encode())
                code = 0 if isinstance(exc, PermissionError) else 4  # CLIs report it as one line
        finally:
            os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd) as fh:
        message = fh.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert message.startswith("needs root")


@pytest.mark.root
def test_cleanup_cli_removes_only_dead_runs() -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"dkc-{dead.pid}-cafe-a"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    try:
        with Testbed(prefix="dkc") as tb:
            tb.host("a")
            cli = [sys.executable, "-m", "deliverykit.testbed"]
            listed = subprocess.run(cli + ["list", "--prefix", "dkc"], capture_output=True,
                                    text=True, check=True).stdout.split()
            assert stale in listed and f"{tb.run_id}-a" in listed
            out = subprocess.run(cli + ["cleanup", "--prefix", "dkc"], capture_output=True,
                                 text=True, check=True).stdout
            assert out.splitlines() == [f"removed {stale}", "removed 1 stale namespace(s)"]
            assert namespaces(tb.run_id) == [f"{tb.run_id}-a"]
    finally:
        if namespaces(stale):
            subprocess.run(["ip", "netns", "del", stale])


@pytest.mark.root
async def test_arun_from_async_code_and_coroutines_in_children() -> None:
    """An async test (running loop) can run callables and coroutine functions in a host."""
    with Testbed() as tb:
        a = tb.host("a")
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        bg = asyncio.create_task(ticker())
        assert await tb.arun(a, async_double, 4) == 8
        assert tb.run(a, async_double, 5) == 10  # the blocking form works too
        assert await tb.arun(a, time.sleep, 0.3) is None
        bg.cancel()
        assert ticks >= 10  # the loop kept running while arun waited


@pytest.mark.root
def test_bridge_inside_an_existing_host() -> None:
    """A router host holding the LAN bridge, with its address on the bridge device."""
    with Testbed() as tb:
        r, a, b = tb.host("r", forwarding=True), tb.host("a"), tb.host("b")
        br = tb.bridge("lan0", host=r)
        assert (br.host, br.ifname) == (r, "lan0")
        tb.address(r, br.ifname, "10.0.3.254/24")
        tb.attach(a, br, "10.0.3.1/24")
        tb.attach(b, br, "10.0.3.2/24")
        assert tb.ifaces(r) == ["lan0", "lo", "p-a", "p-b"]
        for dst in ("10.0.3.2", "10.0.3.254"):
            ready = tb.event()
            host = b if dst == "10.0.3.2" else r
            echo = tb.spawn(host, udp_echo, ready, 7002, 3)
            assert ready.wait(10)
            assert tb.run(a, udp_ping, dst, 7002, 3) == 3
            assert echo.result(10) == 3


@pytest.mark.root
def test_cleanup_without_prefix_takes_every_run_and_stops_orphans() -> None:
    """A SIGKILLed experiment (its own prefix) leaves a namespace with a process in it:
    ``python -m deliverykit.testbed cleanup`` with no --prefix removes both."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"dkx{os.getpid() % 1000}-{dead.pid}-cafe-a"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    orphan = subprocess.Popen(["ip", "netns", "exec", stale, "sleep", "60"], start_new_session=True)
    try:
        with Testbed(prefix="dkt") as live:
            live.link(live.host("a"), live.host("b"), "10.0.1.1/24", "10.0.1.2/24")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not _in_netns(stale):  # sleep started in it
                time.sleep(0.05)
            assert _in_netns(stale), "the orphan never entered its namespace"
            listed = subprocess.run([sys.executable, "-m", "deliverykit.testbed", "list"],
                                    capture_output=True, text=True, timeout=30)
            assert stale in listed.stdout.split()
            out = subprocess.run([sys.executable, "-m", "deliverykit.testbed", "cleanup"],
                                 capture_output=True, text=True, timeout=30)
            assert out.returncode == 0, out.stderr
            assert f"removed {stale}" in out.stdout
            assert namespaces(stale) == []
            assert orphan.wait(timeout=10) != 0  # stopped by a signal, not finished
            assert len(namespaces(live.run_id)) == 2  # a live run is never touched
    finally:
        if orphan.poll() is None:
            orphan.kill()
            orphan.wait()
        if namespaces(stale):
            subprocess.run(["ip", "netns", "del", stale])


def _in_netns(name: str) -> list[int]:
    from deliverykit.testbed.lifecycle import _pids_in_netns

    return _pids_in_netns(name)
