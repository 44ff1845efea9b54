"""Link shaping on one interface's egress: netem (impairments) and tbf (rate).

Egress of one veth end shapes one direction of a link; shape both ends for
both directions.

- tbf alone: a tbf root qdisc (pyroute2).
- netem, kernel with sch_netem: netem root (handle 1:, pyroute2; Gilbert-Elliott
  through the ``tc`` command because pyroute2 0.9.7 does not encode
  ``TCA_NETEM_LOSS``), tbf as its child (parent 1:1, handle 2:), the layout of
  tc-netem(8)'s rate-control example: impair first, then pace, with tbf's queue
  limit in force.
- netem, kernel without sch_netem (minimal VM kernels, including this
  project's CI machines): the userspace impairer of ``impair.py`` behind an
  htb root whose class 1:1 holds the tbf; installed with ``tc -batch`` because
  its classic-BPF filter has no pyroute2 encoder. ``netem_backend()`` says
  which one is in use; ``DELIVERYKIT_NETEM=userspace`` forces the second.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import TestbedError

#: Bytes one full-size Ethernet frame occupies in tbf's accounting (limit_pkts -> bytes).
FRAME_BYTES = 1514


@dataclass(frozen=True, slots=True)
class Netem:
    """netem impairments (tc-netem(8)); percentages are 0..100.

    ``gemodel=(p, r, bad_loss, good_loss)`` is Gilbert-Elliott loss as in
    ``tc ... loss gemodel p r 1-h 1-k``: p = P(good->bad), r = P(bad->good),
    then a frame is lost with ``bad_loss`` (= 1-h) in the bad state and
    ``good_loss`` (= 1-k) in the good state; tc's defaults are (p, 100-p, 100, 0).
    ``reorder_pct`` (needs ``delay_ms > 0``) sends that share undelayed.
    ``rate_bps`` is netem's own rate. ``seed`` makes the userspace impairer's
    random choices reproducible (the kernel netem ignores it).
    """

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss_pct: float = 0.0
    gemodel: tuple[float, float, float, float] | None = None
    duplicate_pct: float = 0.0
    reorder_pct: float = 0.0
    corrupt_pct: float = 0.0
    limit_pkts: int = 1000
    rate_bps: int | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        for name in ("delay_ms", "jitter_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        for name in ("loss_pct", "duplicate_pct", "reorder_pct", "corrupt_pct"):
            if not 0 <= getattr(self, name) <= 100:
                raise ValueError(f"{name} must be within 0..100")
        if self.gemodel is not None:
            if len(self.gemodel) != 4 or not all(0 <= x <= 100 for x in self.gemodel):
                raise ValueError("gemodel is (p, r, h, k), each a percentage 0..100")
            if self.loss_pct:
                raise ValueError("give loss_pct or gemodel, not both")
        if self.reorder_pct and not self.delay_ms:
            raise ValueError("netem reorders only delayed packets: set delay_ms > 0")
        if self.limit_pkts < 1:
            raise ValueError("limit_pkts must be >= 1")

    def pyroute2_args(self) -> dict[str, Any]:
        """Keyword arguments for pyroute2's netem plugin (times in microseconds)."""
        args: dict[str, Any] = {
            "delay": int(round(self.delay_ms * 1000)),
            "jitter": int(round(self.jitter_ms * 1000)),
            "loss": self.loss_pct,
            "duplicate": self.duplicate_pct,
            "limit": self.limit_pkts,
        }
        if self.reorder_pct:
            args["prob_reorder"] = self.reorder_pct
        if self.corrupt_pct:
            args["prob_corrupt"] = self.corrupt_pct
        if self.rate_bps:
            args["rate"] = f"{int(self.rate_bps)}bit"
        return args

    def tc_args(self) -> list[str]:
        """The same settings as ``tc qdisc ... netem`` arguments."""
        out = ["limit", str(self.limit_pkts)]
        if self.delay_ms:
            out += ["delay", f"{self.delay_ms}ms"]
            if self.jitter_ms:
                out += [f"{self.jitter_ms}ms"]
        if self.gemodel is not None:
            out += ["loss", "gemodel"] + [f"{x}%" for x in self.gemodel]
        elif self.loss_pct:
            out += ["loss", f"{self.loss_pct}%"]
        if self.duplicate_pct:
            out += ["duplicate", f"{self.duplicate_pct}%"]
        if self.reorder_pct:
            out += ["reorder", f"{self.reorder_pct}%"]
        if self.corrupt_pct:
            out += ["corrupt", f"{self.corrupt_pct}%"]
        if self.rate_bps:
            out += ["rate", f"{int(self.rate_bps)}bit"]
        return out


@dataclass(frozen=True, slots=True)
class Tbf:
    """Token bucket filter (tc-tbf(8)): ``rate_bps`` in bits/s.

    ``burst_bytes`` defaults to 10 ms worth of tokens, at least 3,000 bytes
    (two full frames). The queue is ``limit_pkts`` full frames
    (x 1,514 bytes), else ``latency_ms`` of queueing at the rate
    (default 50 ms when neither is given).
    """

    rate_bps: int
    burst_bytes: int | None = None
    limit_pkts: int | None = None
    latency_ms: float | None = None

    def __post_init__(self) -> None:
        if self.rate_bps <= 0 or self.rate_bps >= 8 * 2**32:
            raise ValueError("rate_bps must be within 1 .. 34 Gbit/s")
        if self.limit_pkts is not None and self.latency_ms is not None:
            raise ValueError("give limit_pkts or latency_ms, not both")
        if self.burst_bytes is not None and self.burst_bytes < 1600:
            raise ValueError("burst_bytes below one full frame drops every full-size packet")

    @property
    def burst(self) -> int:
        if self.burst_bytes is not None:
            return self.burst_bytes
        return max(3000, self.rate_bps // 8 // 100)

    @property
    def limit_bytes(self) -> int:
        if self.limit_pkts is not None:
            return self.limit_pkts * FRAME_BYTES
        latency = 50.0 if self.latency_ms is None else self.latency_ms
        return int(self.burst + self.rate_bps / 8 * latency / 1000)

    def pyroute2_args(self) -> dict[str, Any]:
        return {"rate": f"{int(self.rate_bps)}bit", "burst": self.burst, "limit": self.limit_bytes}


#: SO_MARK the userspace impairer puts on frames it sends back (the filter passes them).
IMPAIR_MARK = 0x646B

#: Set by the first netem request: True when the kernel has sch_netem.
_kernel_netem: bool | None = None


def netem_backend() -> str:
    """"kernel", "userspace" or "unknown" (not probed yet).

    The environment variable DELIVERYKIT_NETEM=userspace forces the userspace impairer.
    """
    if os.environ.get("DELIVERYKIT_NETEM", "").lower() in ("user", "userspace"):
        return "userspace"
    return {None: "unknown", True: "kernel", False: "userspace"}[_kernel_netem]


def _tc_batch(ns: str, lines: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, "tc", "-batch", "-"],
                          input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=30)


def _abort(proc: subprocess.Popen[str]) -> str:
    """Kill an impairer that failed to start or to be wired in; return its stderr."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _, err = proc.communicate(timeout=10)
    return (err or "").strip()


def _unknown_kind(text: str) -> bool:
    return "qdisc kind is unknown" in text


def clear(ipr: Any, index: int) -> None:
    """Remove the root qdisc (veth falls back to noqueue); no error if there is none."""
    try:
        ipr.tc("del", index=index, parent=0xFFFFFFFF)
    except Exception as exc:  # noqa: BLE001 - pyroute2 raises NetlinkError(ENOENT/EINVAL)
        if getattr(exc, "code", None) not in (2, 22):
            raise


def _kernel_apply(ipr: Any, ns: str, ifname: str, index: int, netem: Netem,
                  tbf: Tbf | None) -> bool:
    """netem root (+ tbf child) in the kernel; False when the kernel has no netem."""
    global _kernel_netem
    if netem.gemodel is not None:
        args = " ".join(netem.tc_args())
        cp = _tc_batch(ns, [f"qdisc add dev {ifname} root handle 1: netem {args}"])
        if cp.returncode != 0:
            if _unknown_kind(cp.stderr):
                _kernel_netem = False
                return False
            raise TestbedError(f"tc netem on {ifname} in {ns} failed: {cp.stderr.strip()}")
    else:
        try:
            ipr.tc("add", "netem", index=index, handle="1:", parent=0xFFFFFFFF,
                   **netem.pyroute2_args())
        except Exception as exc:  # noqa: BLE001 - NetlinkError ENOENT: no sch_netem
            if getattr(exc, "code", None) == 2:
                _kernel_netem = False
                return False
            raise
    _kernel_netem = True
    if tbf is not None:
        ipr.tc("add", "tbf", index=index, parent="1:1", handle="2:", **tbf.pyroute2_args())
    return True


def _impairer_argv(ifname: str, tap: str, netem: Netem) -> list[str]:
    argv = [sys.executable, "-m", "deliverykit.testbed.impair", "--dev", ifname, "--tap", tap,
            "--mark", str(IMPAIR_MARK), "--delay-ms", str(netem.delay_ms),
            "--jitter-ms", str(netem.jitter_ms), "--loss-pct", str(netem.loss_pct),
            "--duplicate-pct", str(netem.duplicate_pct), "--reorder-pct", str(netem.reorder_pct),
            "--corrupt-pct", str(netem.corrupt_pct), "--limit-pkts", str(netem.limit_pkts),
            "--rate-bps", str(netem.rate_bps or 0)]
    if netem.gemodel is not None:
        argv += ["--gemodel", *map(str, netem.gemodel)]
    if netem.seed is not None:
        argv += ["--seed", str(netem.seed)]
    return argv


def _userspace_apply(ns: str, ifname: str, tap: str, netem: Netem,
                     tbf: Tbf | None) -> subprocess.Popen[str]:
    """Start the impairer and steer ``ifname``'s egress through it (see impair.py)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(["ip", "netns", "exec", ns, *_impairer_argv(ifname, tap, netem)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 15.0)
    line = proc.stdout.readline() if ready else ""
    if line.strip() != "ready":
        raise TestbedError(f"userspace netem on {ifname} in {ns} did not start: {line!r} "
                           f"{_abort(proc)}")
    lines = [f"qdisc add dev {ifname} root handle 1: htb default 1",
             f"class add dev {ifname} parent 1: classid 1:1 htb rate 10gbit quantum 200000"]
    if tbf is not None:
        lines.append(f"qdisc add dev {ifname} parent 1:1 handle 2: tbf rate {tbf.rate_bps}bit"
                     f" burst {tbf.burst} limit {tbf.limit_bytes}")
    # classic BPF: A = skb->mark (ancillary SKF_AD_OFF + SKF_AD_MARK);
    # A == IMPAIR_MARK: return 0 (no match, on to class 1:1); else return -1 (match: redirect)
    bpf = f"4,32 0 0 {0xFFFFF000 + 20},21 1 0 {IMPAIR_MARK},6 0 0 {0xFFFFFFFF},6 0 0 0"
    lines.append(f'filter add dev {ifname} parent 1: prio 1 protocol all bpf bytecode "{bpf}"'
                 f" action mirred egress redirect dev {tap}")
    cp = _tc_batch(ns, lines)
    if cp.returncode != 0:
        _abort(proc)
        raise TestbedError(f"userspace netem qdiscs on {ifname} in {ns} failed: "
                           f"{cp.stderr.strip()}")
    return proc


def stop_impairer(proc: subprocess.Popen[str], timeout: float = 5.0) -> dict[str, int] | None:
    """Stop a userspace impairer (EOF on its stdin); returns the counters it reported."""
    if proc.stdin is not None and not proc.stdin.closed:
        try:
            proc.stdin.close()
        except OSError:
            pass
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    out = ""
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            if stream is proc.stdout:
                out = stream.read()
            stream.close()
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


def apply(ipr: Any, ns: str, ifname: str, netem: Netem | None, tbf: Tbf | None,
          tap: str) -> subprocess.Popen[str] | None:
    """Replace the egress qdiscs of ``ifname`` (in netns ``ns``, reached through ``ipr``).

    Returns the userspace impairer process when netem had to run in userspace
    (``tap`` names its tap device); the caller stops it with ``stop_impairer``.
    """
    if netem is None and tbf is None:
        raise ValueError("shape() needs netem, tbf or both")
    (index,) = ipr.link_lookup(ifname=ifname)
    clear(ipr, index)
    try:
        if netem is None:
            assert tbf is not None
            ipr.tc("add", "tbf", index=index, parent=0xFFFFFFFF, handle="1:",
                   **tbf.pyroute2_args())
            return None
        if netem_backend() != "userspace" and _kernel_apply(ipr, ns, ifname, index, netem, tbf):
            return None
        return _userspace_apply(ns, ifname, tap, netem, tbf)
    except TestbedError:
        clear(ipr, index)
        raise
    except Exception as exc:  # noqa: BLE001 - pyroute2's NetlinkError, with context
        clear(ipr, index)
        raise TestbedError(f"shaping {ifname} in {ns} failed: {exc}") from exc
