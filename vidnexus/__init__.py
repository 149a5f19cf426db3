"""vidnexus: video analytics over Kafka with SLO-driven DNN batching and SQL over results.

The public API grows with the project; today it exposes the configuration, the connectors and the
executor::

    from vidnexus import Executor, SessionSpec, Profile
"""

from vidnexus.config import Settings, load_settings
from vidnexus.errors import VidnexusError
from vidnexus.contracts.replies import Reply
from vidnexus.gpu_executor import Executor, Profile, SessionSpec
from vidnexus.streams import Frame

__all__ = [
    "Executor", "Frame", "Profile", "Reply", "SessionSpec", "Settings", "VidnexusError",
    "load_settings",
]
__version__ = "0.1.0"
