"""Role processes in tests: wait for a ``vidnexus`` role's ready line on its stderr (the reader lives
in the package, where ``vidnexus bench soak`` uses it too)."""

from vidnexus.benchmarks.app_deployment import read_until_ready, stop_process

__all__ = ["read_until_ready", "stop_process"]
