"""Process management shared by the local services: spawn detached, wait for ready, stop."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from vidnexus.errors import ServiceError

__all__ = ["LocalService", "ServiceStatus", "port_open", "tail"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    running: bool
    pid: int | None
    address: str
    detail: str = ""


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours still answers kill(0); reap it if so.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


class LocalService:
    """A server process with a pid file and a log under ``home``."""

    name = "service"
    host = "127.0.0.1"

    def __init__(self, home: Path, port: int, start_timeout_s: float = 90.0) -> None:
        self.home = home.resolve()
        self.port = port
        self.start_timeout_s = start_timeout_s
        self.pid_file = self.home / f"{self.name}.pid"
        self.log_file = self.home / f"{self.name}.log"

    # -- to implement -------------------------------------------------------------------------
    def install(self) -> None:
        """Make the binaries available (cached); raise ServiceError with the reason on failure."""
        raise NotImplementedError

    def command(self) -> list[str]:
        """Prepare configuration and data under ``home``; return the server command line."""
        raise NotImplementedError

    def ready(self) -> bool:
        """Whether the server answers requests."""
        return port_open(self.host, self.port)

    def log_for_errors(self) -> Path:
        return self.log_file

    # -- shared -------------------------------------------------------------------------------
    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    def status(self) -> ServiceStatus:
        pid = self.pid()
        running = pid is not None and self.ready()
        detail = "" if running else ("starting or unhealthy" if pid else "stopped")
        return ServiceStatus(self.name, running, pid, self.address, detail)

    def start(self, progress: Callable[[str], None] = lambda s: None) -> ServiceStatus:
        if self.pid() is not None and self.ready():
            return self.status()
        if self.pid() is None and port_open(self.host, self.port):
            raise ServiceError(
                f"{self.name}: port {self.port} on {self.host} is already taken by another process; "
                f"stop it or choose another port (see `vidnexus services --help`)"
            )
        progress(f"installing {self.name}")
        self.install()
        self.home.mkdir(parents=True, exist_ok=True)
        cmd = self.command()
        progress(f"starting {self.name} on {self.address}")
        if self.log_file.exists():  # keep the previous run's log next to the new one
            self.log_file.replace(self.log_file.with_suffix(".log.1"))
        with open(self.log_file, "wb") as log:
            proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.home,
                start_new_session=True,
            )
        self.pid_file.write_text(str(proc.pid))
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ServiceError(
                    f"{self.name} exited with code {proc.returncode} while starting. "
                    f"Last lines of {self.log_for_errors()}:\n{tail(self.log_for_errors())}"
                )
            if self.ready():
                progress(f"{self.name} ready on {self.address} (pid {proc.pid})")
                return self.status()
            time.sleep(0.25)
        self.stop()
        raise ServiceError(
            f"{self.name} did not become ready on {self.address} within {self.start_timeout_s:.0f} s. "
            f"Last lines of {self.log_for_errors()}:\n{tail(self.log_for_errors())}"
        )

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Stop the server (SIGTERM, then SIGKILL); True if one was running."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                break
            except PermissionError:
                os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.2)
            if not _alive(pid):
                break
        self.pid_file.unlink(missing_ok=True)
        return True


def run_checked(cmd: list[str], what: str, timeout_s: float = 900.0) -> str:
    """Run an install step; raise ServiceError with its output on failure."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        raise ServiceError(f"{what}: `{cmd[0]}` is not installed") from None
    except subprocess.TimeoutExpired:
        raise ServiceError(f"{what}: `{' '.join(cmd)}` took longer than {timeout_s:.0f} s") from None
    if p.returncode != 0:
        out = "\n".join((p.stdout + p.stderr).strip().splitlines()[-30:])
        raise ServiceError(f"{what} failed (exit {p.returncode}): {' '.join(cmd)}\n{out}")
    return p.stdout
