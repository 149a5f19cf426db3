"""What a benchmark ran on, recorded in every result."""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

__all__ = ["machine_info"]


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gb = None
    try:
        mem_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        pass
    info: dict[str, Any] = {
        "cpu": cpu, "cores": os.cpu_count(), "memory_gib": mem_gb, "python": sys.version.split()[0],
        "platform": platform.platform(), "command": " ".join(["vidnexus", *sys.argv[1:]]),
    }
    try:
        import torch

        info["torch"] = torch.__version__
        info["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception:
        pass
    return info
