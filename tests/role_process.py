"""Role processes in tests: wait for a ``vidnexus`` role's ready line on its stderr."""

from __future__ import annotations

import subprocess
import threading
import time


def read_until_ready(p: subprocess.Popen[str], ready: str, timeout_s: float, before: list[str],
                     after: list[str] | None = None) -> bool:
    """Read ``p``'s stderr line by line into ``before`` until a line contains ``ready``; then keep
    draining it into ``after`` (default: ``before``) on a thread, and return True. False when the
    process exits first or ``timeout_s`` passes (the caller kills it and reports ``before``)."""
    stream = p.stderr
    assert stream is not None, "start the process with stderr=subprocess.PIPE"
    sink = before if after is None else after
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = stream.readline()
        before.append(line)
        if ready in line:
            def drain() -> None:
                for ln in stream:
                    sink.append(ln)
            threading.Thread(target=drain, daemon=True).start()
            return True
        if not line and p.poll() is not None:
            return False
    return False
