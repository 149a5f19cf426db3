"""``--save FILE.json`` of ``vidnexus run`` and ``vidnexus demo``: the path check (before the run,
so a typo does not cost the run), the checkout's git state, and the atomic write. The document
itself is :func:`vidnexus.roles.run_record.run_record`."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from vidnexus.errors import ConfigError

__all__ = ["check_save_path", "command_line", "git_state", "write_json"]


def check_save_path(path: Path) -> Path:
    """``path`` if a file can be written there; checked before the run starts.

    Raises:
        ConfigError: its folder does not exist or is not writable, or it is a folder.
    """
    folder = path.parent
    if not folder.is_dir():
        raise ConfigError(f"--save {path}: folder {folder} does not exist (create it first)")
    if path.is_dir():
        raise ConfigError(f"--save {path}: is a folder; give a file name, e.g. {path / 'run.json'}")
    if not os.access(folder, os.W_OK):
        raise ConfigError(f"--save {path}: folder {folder} is not writable")
    return path


def command_line(argv: list[str] | None = None) -> str:
    """The command as the user typed it: ``vidnexus`` and the arguments, quoted for a shell."""
    return shlex.join(["vidnexus", *(sys.argv[1:] if argv is None else argv)])


def git_state(package_dir: Path | None = None) -> dict[str, Any] | None:
    """``{"commit": sha, "dirty": bool}`` of the checkout the package runs from (``dirty``: tracked
    files under the package differ from the commit); None when it is not a git checkout (an
    installed wheel) or git is missing."""
    pkg = (package_dir or Path(__file__).resolve().parents[1]).resolve()

    def git(*args: str) -> str | None:
        try:
            p = subprocess.run(["git", "-C", str(pkg), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return p.stdout.strip() if p.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    commit = git("rev-parse", "HEAD")
    # The package's own files must be tracked there (a wheel inside some other checkout is not).
    if not top or not commit or git("ls-files", "--error-unmatch", "--", str(pkg / "__init__.py")) is None:
        return None
    status = git("status", "--porcelain", "--untracked-files=no", "--", str(pkg))
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` to ``path`` atomically: a temporary file beside it, then a rename.

    Raises:
        ConfigError: the file cannot be written (one line, with the reason).
    """
    text = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise ConfigError(f"--save {path}: cannot write it: {e.strerror or e}") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
