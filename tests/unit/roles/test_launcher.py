"""``vidnexus up``'s launcher with stand-in roles (tiny Python processes): start order and ready
lines, restarts with a backoff, giving up, a ``final`` role's exit code, and the stop order."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from vidnexus.errors import VidnexusError
from vidnexus.roles.launcher import Launcher, RoleCommand, restart_delay

# args: ROLE BEHAVIOUR LOGFILE. Prints "ROLE: ready" (unless "never"), then: "serve" waits for
# SIGTERM, "crash" exits 3, "done" exits 0; every event goes to LOGFILE (one line each).
FAKE = r"""
import signal, sys, time
role, how, log = sys.argv[1:4]
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))  # first: a stop may come at once
def note(what):
    with open(log, "a") as f:
        f.write(f"{role} {what}\n")
note("start")
if how != "never":
    print(f"{role}: ready", flush=True)
if how == "crash":
    sys.exit(3)
if how == "done":
    note("done")
    sys.exit(0)
while not stop:
    time.sleep(0.02)
note("stopped")
"""

PROGRAM = (sys.executable, "-c", FAKE)


def _launcher(tmp_path: Path, roles: list[tuple[str, str, str]], **kw) -> tuple[Launcher, Path, list]:
    log = tmp_path / "events"
    lines: list[tuple[str, str]] = []
    cmds = [RoleCommand(name, (role, how, str(log)), ready=f"{role}: ready", final=(how == "done"))
            for name, role, how in roles]
    return Launcher(cmds, out=lambda n, line: lines.append((n, line)), program=PROGRAM, **kw), log, lines


def _events(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_restart_delay_backs_off_and_gives_up():
    assert restart_delay([0.0], 0.0) == 1.0
    assert restart_delay([0.0, 1.0, 2.0, 3.0], 3.0) == 8.0
    assert restart_delay([float(t) for t in range(5)], 4.0) == 16.0
    assert restart_delay([float(t) for t in range(6)], 5.0) is None
    assert restart_delay([0.0, 1.0, 2.0, 3.0, 4.0, 400.0], 400.0) == 1.0  # old exits are forgiven
    assert restart_delay([float(t) for t in range(5)], 4.0, cap_s=5.0) == 5.0


def test_starts_in_order_and_stops_upstream_first(tmp_path):
    launcher, log, lines = _launcher(tmp_path, [("scheduler", "scheduler", "serve"), ("executor", "executor", "serve"),
                                                ("sink", "sink", "serve"), ("worker-1", "worker", "serve"),
                                                ("worker-2", "worker", "serve"), ("ingest", "ingest", "serve")])
    launcher.start()
    assert [e for e in _events(log)] == ["scheduler start", "executor start", "sink start", "worker start",
                                         "worker start", "ingest start"]
    assert set(launcher.running()) == {"scheduler", "executor", "sink", "worker-1", "worker-2", "ingest"}
    launcher.stop()
    stops = [e.split()[0] for e in _events(log) if e.endswith("stopped")]
    assert stops[0] == "ingest" and stops[1:3] == ["worker", "worker"]
    assert stops[3:] == ["sink", "executor", "scheduler"]
    assert launcher.running() == {}
    assert ("worker-2", "worker: ready") in lines and ("up", "stopping ingest") in lines


def test_a_role_that_exits_is_restarted_then_given_up(tmp_path):
    launcher, log, lines = _launcher(tmp_path, [("scheduler", "scheduler", "serve"), ("sink", "sink", "crash")],
                                     restart_base_s=0.01, restart_cap_s=0.05)
    launcher.start()
    try:
        code = launcher.watch(threading.Event())
    finally:
        launcher.stop()
    assert code == 1
    assert [e for e in _events(log) if e.startswith("sink")].count("sink start") == 6  # first run + 5 restarts
    said = [line for n, line in lines if n == "up"]
    assert any("sink exited with code 3; restarting" in s for s in said)
    assert any("giving up" in s for s in said)
    assert "scheduler stopped" in _events(log)


def test_a_final_role_ends_the_watch_with_its_code(tmp_path):
    launcher, log, _ = _launcher(tmp_path, [("sink", "sink", "serve"), ("ingest", "ingest", "done")])
    launcher.start()
    assert launcher.watch(threading.Event()) == 0
    launcher.stop()
    assert _events(log)[-2:] == ["ingest done", "sink stopped"]


def test_a_role_that_never_gets_ready_stops_the_others(tmp_path):
    launcher, log, _ = _launcher(tmp_path, [("scheduler", "scheduler", "serve"), ("executor", "executor", "never")],
                                 ready_timeout_s=1.0)
    t0 = time.monotonic()
    with pytest.raises(VidnexusError, match="printed no 'executor: ready' in 1 s"):
        launcher.start()
    assert time.monotonic() - t0 < 20
    assert {"scheduler stopped", "executor stopped"} <= set(_events(log))
    assert launcher.running() == {}


def test_a_stop_while_starting_ends_start(tmp_path):
    launcher, log, _ = _launcher(tmp_path, [("executor", "executor", "never")])
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    with pytest.raises(VidnexusError, match="was stopped"):
        launcher.start(stop)
    assert launcher.running() == {}


def test_role_names_must_differ():
    with pytest.raises(VidnexusError, match="must differ"):
        Launcher([RoleCommand("w", ("worker",), ready="x"), RoleCommand("w", ("worker",), ready="x")],
                 out=lambda n, line: None)
