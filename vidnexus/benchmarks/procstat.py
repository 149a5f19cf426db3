"""CPU time of the processes a benchmark drives, read from Linux's /proc: a process's, and the part
its JVM spent compiling (the local Kafka broker's JIT warm-up)."""

from __future__ import annotations

import os
from typing import Mapping

__all__ = ["broker_pid", "jvm_flags", "compiler_cpu_s", "cpu_s", "cpu_by_process", "listening_inodes", "socket_tables"]


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


def listening_inodes(tables: Mapping[str, str], port: int) -> set[str]:
    r"""Pure: the socket inodes listening on TCP ``port`` in the texts of ``/proc/net/tcp`` and
    ``tcp6`` (``tables``: path → text; state ``0A`` is LISTEN, the local address's port is hex).

    Example:
        >>> head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode"
        >>> row = "   0: 0100007F:4AA4 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 51234"
        >>> table = {"/proc/net/tcp": head + "\n" + row}
        >>> listening_inodes(table, 19108), listening_inodes(table, 19092)
        ({'51234'}, set())
    """
    out = set()
    for text in tables.values():
        for line in text.splitlines()[1:]:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                out.add(f[9])
    return out


def socket_tables() -> dict[str, str]:
    """This machine's TCP socket tables, ``/proc/net/tcp`` and ``tcp6`` (path → text), those that
    can be read."""
    tables = {}
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                tables[path] = f.read()
        except OSError:
            continue
    return tables


def _holds_socket(pid: str, inodes: set[str]) -> bool:
    """Whether process ``pid`` has one of the sockets ``inodes`` open."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            return True
    return False


def broker_pid(bootstrap: str) -> int | None:
    """The local broker's JVM (a ``kafka.Kafka`` java process) listening on the first bootstrap
    address's port, when the broker is on loopback (None when no such JVM listens there: several
    local brokers each have their own). Where the sockets cannot be read, the only
    ``kafka.Kafka`` JVM, if there is just one."""
    hosts = [h.rsplit(":", 1) for h in bootstrap.split(",")]
    if not all(h[0] in ("127.0.0.1", "localhost", "::1", "[::1]") for h in hosts):
        return None
    tables = socket_tables()
    port = int(hosts[0][1]) if len(hosts[0]) == 2 and hosts[0][1].isdigit() else 9092
    inodes = listening_inodes(tables, port) if tables else None
    brokers = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"java") and b"kafka.Kafka" in cmd:
            if inodes is None:
                brokers.append(int(name))
            elif inodes and _holds_socket(name, inodes):
                return int(name)
    return brokers[0] if len(brokers) == 1 else None


def jvm_flags(pid: int | None) -> list[str] | None:
    """The ``-X`` options a JVM was started with (heap, collector), from its command line: what a
    benchmark records of the broker it measured through. None without a pid or where it cannot be read.

    >>> jvm_flags(None) is None
    True
    """
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().decode(errors="replace").split("\0")
    except OSError:
        return None
    return [a for a in args if a.startswith("-X")]
