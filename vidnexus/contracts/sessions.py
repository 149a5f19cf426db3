"""The identity of a session: a model served under one latency SLO.

A session's string form, ``resnet18-100ms``, names its request topic, its executor queue and its
rows in stats and plans; it is made and read here only.

Example:
    >>> k = SessionKey("resnet18", 100.0)
    >>> str(k), k.slo_s
    ('resnet18-100ms', 0.1)
    >>> SessionKey.parse("ssd-lite-33.5ms")
    SessionKey(model='ssd-lite', slo_ms=33.5)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from vidnexus.errors import ConfigError

__all__ = ["SessionKey"]

_MODEL = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.\-]*")


@dataclass(frozen=True, order=True)
class SessionKey:
    """(model, SLO in ms). ``slo_ms`` is kept to 3 decimals so that a key survives its string form."""

    model: str
    slo_ms: float

    def __post_init__(self) -> None:
        if not _MODEL.fullmatch(self.model):
            raise ConfigError(f"model name {self.model!r}: use letters, digits, '_', '.', '-'")
        if not (math.isfinite(self.slo_ms) and self.slo_ms > 0):
            raise ConfigError(f"session {self.model}: SLO must be a finite number of ms > 0, got {self.slo_ms}")
        object.__setattr__(self, "slo_ms", round(float(self.slo_ms), 3))

    def __str__(self) -> str:
        return f"{self.model}-{self.slo_ms:g}ms"

    @property
    def slo_s(self) -> float:
        return self.slo_ms / 1000

    @classmethod
    def parse(cls, text: str) -> "SessionKey":
        """The key of a string form ``MODEL-SLOms``.

        Raises:
            ConfigError: ``text`` is not a session's string form.
        """
        model, sep, slo = text.rpartition("-")
        try:
            if not sep or not slo.endswith("ms"):
                raise ValueError
            return cls(model, float(slo[:-2]))
        except (ValueError, ConfigError):
            raise ConfigError(f"{text!r} is not a session name (MODEL-SLOms, e.g. resnet18-100ms)") from None

    @classmethod
    def from_arg(cls, text: str) -> "SessionKey":
        """The key of a command-line ``MODEL:SLO_MS`` (``resnet18:100``).

        Raises:
            ConfigError: naming the expected form.
        """
        model, sep, slo = text.partition(":")
        try:
            if not sep:
                raise ValueError
            return cls(model, float(slo))
        except (ValueError, ConfigError):
            raise ConfigError(f"--session {text!r}: expected MODEL:SLO_MS with SLO_MS > 0, e.g. resnet18:100") from None
