"""Error hierarchy. Messages name the stream, step, model or session they are about."""

from __future__ import annotations

__all__ = [
    "VidnexusError",
    "ConfigError",
    "ConnectorError",
    "PlacementError",
    "BatchContractError",
    "ModelError",
    "StreamError",
    "CodecError",
    "ServiceError",
]


class VidnexusError(Exception):
    """Base class of every error vidnexus raises on purpose."""


class ConfigError(VidnexusError):
    """A setting is missing or invalid; the message says what to change."""


class ConnectorError(VidnexusError):
    """The bus or the store failed. ``retryable`` says whether trying again may help."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class PlacementError(VidnexusError):
    """A session cannot be placed: no batch size meets its SLO, or no device has room."""


class BatchContractError(VidnexusError):
    """A batch function returned a different number of outputs than it was given inputs."""


class ModelError(VidnexusError):
    """Unknown model, bad model file, or a model that fails to run."""


class StreamError(VidnexusError):
    """A stream cannot be registered, opened or decoded."""


class CodecError(VidnexusError):
    """A message cannot be encoded or decoded (unknown version, malformed, oversized)."""


class ServiceError(VidnexusError):
    """A local service (Kafka broker, ClickHouse server) cannot be installed or started."""
