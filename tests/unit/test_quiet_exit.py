"""A process that trains or loads a torchvision model exits without native noise: on a machine with
no GPU device, `import vidnexus` blocks triton, whose bindings printed hundreds of `nanobind:
leaked ...` lines at every exit (torch imports it from its compiler stack: every optimizer, and
torchvision)."""

import os
import subprocess
import sys

import pytest

GPU_NODES = ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia", "/dev/kfd")


@pytest.mark.skipif(any(os.path.exists(p) for p in GPU_NODES), reason="triton is kept where a GPU device exists")
def test_training_and_torchvision_leave_no_native_noise():
    code = ("import sys, vidnexus, torch, torchvision\n"
            "m = torchvision.models.mobilenet_v3_small(weights=None)\n"
            "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "m(torch.zeros(1, 3, 64, 64)).sum().backward(); opt.step()\n"
            "print('triton' if sys.modules.get('triton') else 'no triton')\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "no triton"
    assert "leaked" not in p.stderr and "nanobind" not in p.stderr, p.stderr[-2000:]
