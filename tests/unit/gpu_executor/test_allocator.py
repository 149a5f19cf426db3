"""glibc's malloc thresholds, fixed by every runner (gpu_executor.allocator): a CPU batch reuses
the heap instead of faulting its activations in afresh."""

import subprocess
import sys

SCRIPT = """
import resource, sys, torch
torch.set_num_threads(1)
if sys.argv[1] == "kept":
    from vidnexus.gpu_executor.allocator import keep_freed_memory
    assert keep_freed_memory()
m = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU())
                          for _ in range(4)]).eval()
x = torch.zeros(8, 16, 112, 112)  # 6.4 MB activations per layer
with torch.inference_mode():
    m(x)
    m(x)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):
        m(x)
    print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // 3)
"""


def _faults_per_batch(mode: str) -> int:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}  # no MALLOC_* of the caller's
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.split()[-1])


def test_a_runners_process_keeps_freed_memory_for_the_next_batch():
    kept, default = _faults_per_batch("kept"), _faults_per_batch("default")
    # 4 layers × 6.4 MB: ~6,000 pages a batch when every block is mapped afresh.
    assert default > 1000, default
    assert kept < default / 10, (kept, default)


def test_the_environment_s_settings_stand(monkeypatch):
    from vidnexus.gpu_executor import allocator

    monkeypatch.setattr(allocator, "_done", None)
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert allocator.keep_freed_memory() is True  # in force, with the environment's values: nothing set
    monkeypatch.setattr(allocator, "_done", None)
