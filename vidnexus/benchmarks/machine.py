"""What a benchmark ran on, recorded in every result."""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

__all__ = ["machine_info", "command_line"]


def command_line(argv: list[str] | None = None, main_module: str | None = None) -> str:
    """The command as typed: ``vidnexus …`` for the CLI (its script or ``python -m vidnexus``),
    ``python -m MODULE …`` for another module run with ``-m``, else ``python SCRIPT …``.

    >>> command_line(["/venv/bin/vidnexus", "bench", "hop"])
    'vidnexus bench hop'
    >>> command_line(["/x/tests/integration/tools/app_slo.py", "game"], "tests.integration.tools.app_slo")
    'python -m tests.integration.tools.app_slo game'
    """
    argv = list(sys.argv if argv is None else argv)
    if main_module is None:
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        main_module = spec.name if spec is not None else None
    prog = os.path.basename(argv[0]) if argv else ""
    if prog == "vidnexus" or main_module in ("vidnexus", "vidnexus.__main__"):
        head = ["vidnexus"]
    elif main_module:
        head = ["python", "-m", main_module.removesuffix(".__main__")]
    else:
        head = ["python", argv[0] if argv else "?"]
    return " ".join([*head, *argv[1:]])


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
        "platform": platform.platform(), "command": command_line(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
        info["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception:
        pass
    return info
