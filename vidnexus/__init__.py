"""vidnexus: video analytics over Kafka with SLO-driven DNN batching and SQL over results.

The public API grows with the project; today it exposes the configuration, the connectors and the
executor::

    from vidnexus import Executor, SessionSpec, Profile
"""

import os as _os
import sys as _sys


def _without_triton_where_no_gpu() -> None:
    """On a machine with no GPU device, make ``import triton`` fail (torch then treats triton as
    not installed).

    torch pulls triton in from its compiler stack (``torch._dynamo``, imported by every optimizer
    and by torchvision), and triton's native bindings print hundreds of ``nanobind: leaked ...``
    lines when the process exits. Triton only generates GPU kernels; vidnexus does not use
    ``torch.compile``. Where an NVIDIA or AMD device node exists, nothing changes."""
    if "triton" in _sys.modules:
        return
    if not any(_os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia", "/dev/kfd")):
        _sys.modules["triton"] = None  # type: ignore[assignment]  # the import system's "blocked" marker


_without_triton_where_no_gpu()

from vidnexus.config import Settings, load_settings  # noqa: E402
from vidnexus.errors import VidnexusError  # noqa: E402
from vidnexus.contracts.replies import Reply  # noqa: E402
from vidnexus.gpu_executor import Executor, Profile, SessionSpec  # noqa: E402
from vidnexus.streams import Frame  # noqa: E402

__all__ = [
    "Executor", "Frame", "Profile", "Reply", "SessionSpec", "Settings", "VidnexusError",
    "load_settings",
]
__version__ = "0.1.0"
