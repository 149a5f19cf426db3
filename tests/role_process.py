"""Role processes in tests: wait for a ``vidnexus`` role's ready line on its stderr (the reader lives
in the package, where ``vidnexus bench soak`` uses it too), and a free loopback port for one."""

import socket

from vidnexus.benchmarks.app_deployment import read_until_ready, stop_process

__all__ = ["read_until_ready", "stop_process", "free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
