"""What every ``vidnexus`` command shares: the consoles, settings, option checks, result printing."""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from vidnexus.config import Settings, load_settings
from vidnexus.errors import ConfigError

__all__ = ["console", "err_console", "finite", "settings", "print_result", "require_kafka"]


def _width() -> int | None:
    """Tables at full width when stdout is not a terminal (a pipe, a file, CI): rich would otherwise
    wrap them at 80 columns and cut names. ``COLUMNS`` still wins; on a terminal, its width."""
    if os.environ.get("COLUMNS") or sys.stdout.isatty():
        return None
    return 240


console = Console(width=_width())
err_console = Console(stderr=True, soft_wrap=True)  # status lines: one per line, never wrapped


def finite(value: float | None) -> float | None:
    """Option callback: reject ``inf`` and ``nan`` (typer's float accepts them)."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


def settings(**overrides: Any) -> Settings:
    """The settings: ``VNX_*`` variables, with the command line's options first."""
    return load_settings(**overrides)


def require_kafka(s: Settings, role: str) -> None:
    """A distributed role runs on Kafka; on the in-memory bus it would talk to nobody.

    Raises:
        ConfigError: one line saying what to do instead.
    """
    if s.bus != "kafka":
        raise ConfigError(f"vidnexus {role} is a distributed role and runs on Kafka: set VNX_BUS=kafka "
                          "(on the in-memory bus it would talk to no other process; `vidnexus run APP` runs "
                          "every role in one process)")


def print_result(res: Any, fmt: str = "table", title: str | None = None) -> None:
    """Print a QueryResult as a rich table, CSV or JSON lines."""
    if fmt == "json":
        for row in res.dicts():
            print(json.dumps(row, default=str))
        return
    if fmt == "csv":
        import csv

        w = csv.writer(sys.stdout)
        w.writerow(res.columns)
        w.writerows(res.rows)
        return
    t = Table(title=title, show_lines=False)
    for c in res.columns:
        t.add_column(c)
    for r in res.rows:
        t.add_row(*[("" if v is None else str(v)) for v in r])
    console.print(t)


class RepeatFilter:
    """A logging filter that lets a repeated line through at most once per ``every_s`` seconds,
    with the count of those it held back: an outage logs one line per state change instead of one
    per retry. Lines of our own loggers repeat when their text does; a client library's when its
    template does (their arguments are connection ids and counters)."""

    def __init__(self, every_s: float = 30.0, clock: Any = None) -> None:
        from vidnexus.clock import MonotonicClock

        self.every_s = every_s
        self._clock = clock or MonotonicClock()
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}

    def filter(self, record: Any) -> bool:
        text = record.getMessage() if record.name.startswith("vidnexus") else str(record.msg)
        key = (record.name, record.levelno, text[:200])
        now = self._clock.now()
        last = self._seen.get(key)
        if last is not None and now - last[0] < self.every_s:
            self._seen[key] = (last[0], last[1] + 1)
            return False
        if last is not None and last[1]:
            record.msg = f"{record.msg} ({last[1]} more like this in the last {now - last[0]:.0f} s)"
        if len(self._seen) > 5000:
            self._seen.clear()
        self._seen[key] = (now, 0)
        return True


def write_private(path: Any, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (mode 600), creating its folder."""
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def console_tokens(cfg: Settings, who: str) -> Any:
    """The console's read and admin tokens: from the settings, else from <data dir>/console-token
    and console-admin-token, else generated into those files (mode 600), said on stderr."""
    import secrets

    from vidnexus.roles.console import Tokens

    out = []
    for value, env, file in ((cfg.console_token, "VNX_CONSOLE_TOKEN", "console-token"),
                             (cfg.console_admin_token, "VNX_CONSOLE_ADMIN_TOKEN", "console-admin-token")):
        path = cfg.data_dir / file
        if value is None and path.exists():
            value = path.read_text().strip()
        if value is None:
            value = secrets.token_urlsafe(24)
            err_console.print(f"{who}: no {env}; generated a token into {path}")
            write_private(path, value + "\n")
        out.append(value)
    return Tokens(out[0], out[1])
