"""Every role of an app on this machine, one child process each (``vidnexus up``): started in
order, each waited for until it says it is ready, their output interleaved with the role's name,
a role that exits restarted with a backoff, and all of them stopped in order (the upstream roles
first, so that what was read is handled) on Ctrl-C or SIGTERM.

The children are the commands a deployment across machines runs one by one (``vidnexus
scheduler``, ``executor``, ``sink``, ``worker``, ``ingest``); ``vidnexus up`` only saves typing
them. They run in process groups of their own, so that Ctrl-C reaches the launcher alone and it
stops them in order; stop the launcher with Ctrl-C or SIGTERM (a SIGKILL leaves them running).

Example:
    >>> cmds = [RoleCommand("scheduler", ("scheduler",), ready="scheduler: running")]
    >>> launcher = Launcher(cmds, out=lambda name, line: None)  # doctest: +SKIP
    >>> launcher.start(); launcher.watch(stop); launcher.stop()  # doctest: +SKIP
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.errors import VidnexusError

__all__ = ["RoleCommand", "Launcher", "restart_delay", "STOP_ORDER"]

STOP_ORDER = ("ingest", "worker", "sink", "executor", "scheduler")
"""Roles stop upstream first: ingest ends its streams, workers finish what they read, the sink
writes what they sent; the executor and the scheduler go last."""


@dataclass(frozen=True)
class RoleCommand:
    """One role: its name in the output (``worker-2``), the ``vidnexus`` arguments, the text of
    the line that says it is ready, and whether it is restarted when it exits (``final``: its exit
    ends the launcher's :meth:`Launcher.watch` with its exit code, as ``ingest --once`` does)."""

    name: str
    args: tuple[str, ...]
    ready: str
    final: bool = False

    @property
    def role(self) -> str:
        return self.args[0]


def restart_delay(exits: Sequence[float], now: float, *, window_s: float = 300.0, most: int = 5,
                  base_s: float = 1.0, cap_s: float = 30.0) -> float | None:
    """Seconds to wait before restarting a role that exited at the times ``exits`` (the last one
    just now): 1, 2, 4 … up to ``cap_s`` seconds for the exits within ``window_s``; None (give up)
    when more than ``most`` fell in that window.

    >>> restart_delay([10.0], 10.0), restart_delay([1.0, 5.0, 10.0], 10.0)
    (1.0, 4.0)
    >>> restart_delay([float(t) for t in range(6)], 5.0) is None
    True
    """
    recent = [t for t in exits if now - t <= window_s]
    if len(recent) > most:
        return None
    return float(min(cap_s, base_s * 2.0 ** max(0, len(recent) - 1)))


@dataclass
class _Child:
    command: RoleCommand
    proc: subprocess.Popen[str] | None = None
    ready: threading.Event = field(default_factory=threading.Event)
    log: list[str] = field(default_factory=list)
    exits: list[float] = field(default_factory=list)
    restart_at: float | None = None
    pump: threading.Thread | None = None


class Launcher:
    """Run ``commands`` as ``python -P -m vidnexus ARGS`` children.

    Args:
        commands: in start order (each is waited for before the next starts).
        out: ``out(name, line)`` for every line a child prints (stdout and stderr), and for the
            launcher's own lines (name ``up``).
        env: the children's environment (default: this process's).
        ready_timeout_s: how long a role may take to print its ready line.
        restart_base_s, restart_cap_s: the restarts' backoff (:func:`restart_delay`).
        env_of: variables of one role's own (by name) over ``env``: its health and metrics ports.
        program: what runs ``ARGS`` (default ``python -P -m vidnexus``: the current directory is
            not on the path, so a user's file never shadows a package; apps are still found there
            by :func:`vidnexus.apps.load_app`).
    """

    def __init__(self, commands: Sequence[RoleCommand], *, out: Callable[[str, str], None],
                 env: Mapping[str, str] | None = None, clock: Clock | None = None, ready_timeout_s: float = 300.0,
                 stop_timeout_s: float = 30.0, restart_base_s: float = 1.0, restart_cap_s: float = 30.0,
                 program: Sequence[str] = (sys.executable, "-P", "-m", "vidnexus"),
                 env_of: Mapping[str, Mapping[str, str]] | None = None) -> None:
        names = [c.name for c in commands]
        if len(set(names)) != len(names):
            raise VidnexusError(f"role names must differ: {names}")
        self.children = [_Child(c) for c in commands]
        self.out = out
        self.env = dict(os.environ if env is None else env)
        self.env_of = {k: dict(v) for k, v in (env_of or {}).items()}
        self.clock = clock or MonotonicClock()
        self.ready_timeout_s = ready_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.program = tuple(program)
        self.restart_base_s, self.restart_cap_s = restart_base_s, restart_cap_s
        self._lock = threading.Lock()

    # -- start ---------------------------------------------------------------------------------
    def _spawn(self, child: _Child) -> None:
        child.ready.clear()
        p = subprocess.Popen([*self.program, *child.command.args],
                             env={**self.env, **self.env_of.get(child.command.name, {})}, text=True,
                             errors="replace", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, bufsize=1, process_group=0)
        child.proc = p
        child.pump = threading.Thread(target=self._pump, args=(child, p), name=f"vnx-up-{child.command.name}",
                                      daemon=True)
        child.pump.start()

    def _pump(self, child: _Child, p: subprocess.Popen[str]) -> None:
        assert p.stdout is not None
        for line in p.stdout:
            line = line.rstrip("\n")
            with self._lock:
                child.log.append(line)
                del child.log[:-200]
                self.out(child.command.name, line)
            if child.command.ready in line:
                child.ready.set()

    def _wait_ready(self, child: _Child, stop: threading.Event | None) -> None:
        deadline = self.clock.now() + self.ready_timeout_s
        p = child.proc
        assert p is not None
        while not child.ready.wait(0.2):
            if p.poll() is not None and child.pump is not None:
                child.pump.join(2.0)  # its last lines, the ready line among them, may still be in the pipe
                if child.ready.is_set():
                    break
            if p.poll() is not None or self.clock.now() >= deadline or (stop is not None and stop.is_set()):
                why = ("was stopped" if stop is not None and stop.is_set() else
                       f"exited with code {p.returncode}" if p.poll() is not None else
                       f"printed no {child.command.ready!r} in {self.ready_timeout_s:g} s")
                raise VidnexusError(f"`vidnexus {' '.join(child.command.args)}` {why} before it was ready"
                                    + ("" if stop is not None and stop.is_set() else
                                       "; its last lines are above"))

    def start(self, stop: threading.Event | None = None) -> None:
        """Start every role in order, each once the one before it is ready.

        Raises:
            VidnexusError: a role exited or did not get ready (the roles started so far are
                stopped again).
        """
        try:
            for child in self.children:
                self.say(f"starting {child.command.name}: vidnexus {' '.join(child.command.args)}")
                self._spawn(child)
                self._wait_ready(child, stop)
        except BaseException:
            self.stop()
            raise

    # -- watch ---------------------------------------------------------------------------------
    def watch(self, stop: threading.Event) -> int:
        """Keep the roles running until ``stop`` (then 0) or until a ``final`` role exits (then its
        exit code). A role that exits is restarted after :func:`restart_delay`; one that keeps
        exiting makes the launcher give up (1)."""
        while not stop.is_set():
            now = self.clock.now()
            for child in self.children:
                p = child.proc
                if child.restart_at is not None:
                    if now >= child.restart_at:
                        child.restart_at = None
                        self.say(f"restarting {child.command.name}")
                        self._spawn(child)
                    continue
                if p is None or p.poll() is None:
                    continue
                if child.command.final:
                    return int(p.returncode)
                child.exits.append(now)
                delay = restart_delay(child.exits, now, base_s=self.restart_base_s, cap_s=self.restart_cap_s)
                if delay is None:
                    self.say(f"{child.command.name} exited with code {p.returncode} {len(child.exits)} times "
                             "in a few minutes; giving up")
                    return 1
                self.say(f"{child.command.name} exited with code {p.returncode}; restarting in {delay:g} s")
                child.restart_at = now + delay
            stop.wait(0.25)
        return 0

    # -- stop ----------------------------------------------------------------------------------
    def stop(self) -> None:
        """SIGTERM the running roles in :data:`STOP_ORDER` (a role's copies together), each group
        waited for before the next; SIGKILL a role still there after ``stop_timeout_s``."""
        order = {r: i for i, r in enumerate(STOP_ORDER)}
        groups: dict[int, list[_Child]] = {}
        for child in self.children:
            child.restart_at = None
            if child.proc is not None and child.proc.poll() is None:
                groups.setdefault(order.get(child.command.role, len(order)), []).append(child)
        for _, group in sorted(groups.items()):
            for child in group:
                assert child.proc is not None
                self.say(f"stopping {child.command.name}")
                child.proc.send_signal(signal.SIGTERM)
            for child in group:
                assert child.proc is not None
                try:
                    child.proc.wait(self.stop_timeout_s)
                except subprocess.TimeoutExpired:
                    self.say(f"{child.command.name} did not stop in {self.stop_timeout_s:g} s; killing it")
                    child.proc.kill()
                    child.proc.wait(10)
                if child.pump is not None:
                    child.pump.join(5)  # its last lines

    def say(self, line: str) -> None:
        with self._lock:
            self.out("up", line)

    def running(self) -> dict[str, int]:
        """Each running role's pid."""
        return {c.command.name: c.proc.pid for c in self.children if c.proc is not None and c.proc.poll() is None}
