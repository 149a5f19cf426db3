"""CPU time of the processes a benchmark drives, read from Linux's /proc: a process's, and the part
its JVM spent compiling (the local Kafka broker's JIT warm-up)."""

from __future__ import annotations

import os
from typing import Mapping

__all__ = ["broker_pid", "compiler_cpu_s", "cpu_s", "cpu_by_process"]


def _ticks(stat: str) -> int:
    """User + system clock ticks from a /proc ``stat`` line (fields after the name in parentheses)."""
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        return _ticks(f.read()) / os.sysconf("SC_CLK_TCK")


def cpu_by_process(pids: Mapping[str, int | None]) -> dict[str, float]:
    """:func:`cpu_s` of each named process (those with no pid, or gone, left out)."""
    out = {}
    for name, pid in pids.items():
        if pid is None:
            continue
        try:
            out[name] = cpu_s(pid)
        except OSError:  # the process ended
            continue
    return out


def compiler_cpu_s(pid: int) -> float:
    """CPU seconds a JVM's just-in-time compiler threads (HotSpot's ``C1/C2 CompilerThreadN``) have
    run; threads that ended meanwhile are not counted (HotSpot starts and stops compiler threads
    with the work queued)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:  # the thread ended
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        if "CompilerThre" in name:  # /proc truncates thread names to 15 characters
            total += _ticks(stat)
    return total / os.sysconf("SC_CLK_TCK")


def broker_pid(bootstrap: str) -> int | None:
    """The local broker's JVM (a ``kafka.Kafka`` java process), when the broker is on loopback."""
    if not all(h.split(":")[0] in ("127.0.0.1", "localhost", "::1") for h in bootstrap.split(",")):
        return None
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"java") and b"kafka.Kafka" in cmd:
            return int(name)
    return None
