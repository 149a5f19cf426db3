"""A benchmark stopped with SIGTERM stops what it started (until 2026-11-29 a killed `bench peers`
left its Triton server and backend running)."""

import signal
import subprocess
import sys
import time
from pathlib import Path


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the processes whose parent is ``pid``."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            ppid = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid:
            out.append((int(p.name), cmd))
    return out


def test_sigterm_stops_the_processes_a_benchmark_started():
    # bench hop (the broker of the test run's settings, as the quick runs use) starts an echo process.
    bench = subprocess.Popen([sys.executable, "-m", "vidnexus", "bench", "hop", "--quick"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline, echo = time.monotonic() + 120, None
        while echo is None and time.monotonic() < deadline and bench.poll() is None:
            echo = next((pid for pid, cmd in _children(bench.pid) if "--echo" in cmd), None)
            time.sleep(0.05)
        assert echo is not None, f"no echo process started; the bench said: {bench.stderr.read() if bench.stderr else ''}"
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(60) == 143
        deadline = time.monotonic() + 30
        while Path(f"/proc/{echo}").exists() and time.monotonic() < deadline:
            # Reaped by the bench (its child); a zombie here would mean nobody waited for it.
            time.sleep(0.1)
        assert not Path(f"/proc/{echo}").exists(), "the echo process outlived the benchmark"
    finally:
        if bench.poll() is None:
            bench.kill()
