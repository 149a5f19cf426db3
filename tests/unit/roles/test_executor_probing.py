"""A served executor with ``probe`` measures larger batches in idle time; its stats carry the
extended profile (what the scheduler plans with) and each extension is cached for its next start."""

from __future__ import annotations

import time

from vidnexus.config import Settings
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.sessions import SessionKey
from vidnexus.roles.executor import ExecutorRole
from vidnexus.testing import FakeClock, FakeRunner


def _role(probe: bool, saved: list) -> tuple[ExecutorRole, FakeClock]:
    clock = FakeClock(wall_start=1_800_000_000.0)
    runner = FakeRunner(Profile.linear(0.002, 0.010, 256), clock)
    role = ExecutorRole(Settings(topic_prefix="probe"), [SessionKey("m", 400)], bus=MemoryBus(clock=clock), clock=clock,
                        executor_id="e1", stats_every_s=1e9, follow_plans=False,
                        load=lambda names: ({"m": runner}, {"m": Profile.linear(0.002, 0.010, 16)}),
                        inputs=lambda m: None, probe=probe, save_profile=lambda m, p: saved.append((m, p.max_batch)))
    return role, clock


def test_the_stats_carry_the_sizes_measured_in_the_background():
    saved: list = []
    role, clock = _role(True, saved)
    role.start()
    try:
        assert role.executor.submit("m-400ms", 1.0).result(timeout=10).ok
        deadline = time.monotonic() + 10
        while len(saved) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        st = role.stats(clock.now(), role.executor.stats())
    finally:
        role.close()
    assert saved == [("m", 24), ("m", 32), ("m", 48), ("m", 64)]
    assert st.profiles["m"].max_batch == 64


def test_without_probe_the_stats_keep_the_start_up_profile():
    saved: list = []
    role, clock = _role(False, saved)
    role.start()
    try:
        assert role.executor.submit("m-400ms", 1.0).result(timeout=10).ok
        st = role.stats(clock.now(), role.executor.stats())
    finally:
        role.close()
    assert saved == [] and st.profiles["m"].max_batch == 16
