"""The executor: profiles, batching policies, the duty-cycle backend and the in-process service.

Pure policy modules (``batching``, ``early_drop``, ``lazy_drop``, ``fifo``, ``policies``, ``backend``)
import no torch, kafka, av or ClickHouse client; ``runner``, ``profiler`` and ``executor`` do the I/O.
"""

from vidnexus.gpu_executor.backend import Dispatch, Dropped, DutyCycle, SessionSpec, Step
from vidnexus.gpu_executor.batching import BatchDecision
from vidnexus.gpu_executor.executor import Executor
from vidnexus.gpu_executor.policies import make_policy
from vidnexus.contracts.profile import Profile

__all__ = [
    "BatchDecision", "Dispatch", "Dropped", "DutyCycle", "Executor", "Profile",
    "SessionSpec", "Step", "make_policy",
]
