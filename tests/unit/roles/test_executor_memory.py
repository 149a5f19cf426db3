"""An executor reports the memory its models hold and what its device can hold, which the
scheduler plans with as a second capacity (tests/unit/control/test_plans_and_scheduler.py)."""

from __future__ import annotations

import torch

from vidnexus.config import Settings
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.sessions import SessionKey
from vidnexus.gpu_executor.runner import TorchRunner, device_memory_bytes, model_bytes
from vidnexus.roles.executor import ExecutorRole
from vidnexus.testing import FakeClock


def test_the_executor_reports_its_models_bytes_and_its_devices_room():
    clock = FakeClock(wall_start=1_800_000_000.0)
    module = torch.nn.Sequential(torch.nn.Linear(100, 50), torch.nn.BatchNorm1d(50))
    runner = TorchRunner("m", module)
    expected = (100 * 50 + 50 + 50 + 50) * 4 + (50 + 50) * 4 + 8  # weights, bias, BN affine; BN stats + count
    assert model_bytes(runner) == expected
    role = ExecutorRole(Settings(topic_prefix="mem"), [SessionKey("m", 100)], bus=MemoryBus(clock=clock), clock=clock,
                        executor_id="e1", stats_every_s=1e9, follow_plans=False,
                        load=lambda names: ({"m": runner}, {"m": Profile.linear(0.001, 0.001, 8)}),
                        inputs=lambda m: None)
    role.start()
    try:
        st = role.stats(clock.now(), role.executor.stats())
    finally:
        role.close()
    assert st.model_bytes == {"m": expected}
    free = device_memory_bytes("cpu")
    assert free > 0  # /proc/meminfo's MemAvailable
    assert abs(st.memory_bytes - (free + expected)) < 256 << 20  # read a moment apart
