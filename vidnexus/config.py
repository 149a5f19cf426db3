"""Settings, read from ``VNX_*`` environment variables (pydantic-settings).

Example:
    >>> s = Settings(bus="memory", store="chdb")
    >>> s.topic_prefix, s.kafka_driver
    ('vnx', 'confluent')
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "load_settings", "SINK_MAX_ROWS"]

SINK_MAX_ROWS = 20_000
"""Rows the sink buffers before an insert (``vidnexus sink --max-rows``): few large inserts, as
ClickHouse wants."""


class Settings(BaseSettings):
    """Runtime configuration. Every field can be set as ``VNX_<FIELD>`` in the environment."""

    model_config = SettingsConfigDict(
        env_prefix="VNX_", frozen=True, extra="forbid", use_attribute_docstrings=True
    )

    bus: Literal["memory", "kafka"] = "memory"
    """Message bus: ``memory`` (in-process, embedded mode) or ``kafka``."""

    store: Literal["chdb", "clickhouse"] = "chdb"
    """Result store: ``chdb`` (embedded ClickHouse) or ``clickhouse`` (a server, native protocol)."""

    kafka_driver: Literal["confluent", "kafka-python"] = "confluent"
    """Kafka client library: ``confluent`` (librdkafka) or ``kafka-python``."""

    frame_encoding: Literal["auto", "jpeg"] = "auto"
    """How ingest puts frames on the bus: ``auto`` — JPEG over Kafka, uncompressed on the in-process
    bus of embedded mode (a decoder's YUV planes or BGR: nothing encoded by ingest and decoded by the
    worker for nothing; JPEG for a frame larger than the bus's message limit); ``jpeg`` — always."""

    kafka_linger_ms: float | None = Field(default=None, ge=0, le=1000)
    """How long the Kafka producer waits to batch records before it sends (``linger.ms``). None: each
    driver's default — confluent adapts (each record sent at once while the bus publishes under
    ~1,500 records/s, batched with a 0.5 ms linger above: ``LingerSwitch``), kafka-python waits 2 ms.
    A number fixes it: 0 sends every record at once (a shorter round trip at low rates; with
    librdkafka a linger of 0.1 ms measured like 0.5 ms, not like 0), more broker CPU and a longer
    tail at high rates, where a linger lets records share a request (docs/development.md)."""

    kafka_bootstrap: str = "127.0.0.1:19092"
    """Kafka bootstrap servers, ``host:port[,host:port]`` (the local dev broker listens on 19092)."""

    clickhouse_url: str = "clickhouse://default:@127.0.0.1:19000/default"
    """ClickHouse server URL for the native protocol: ``clickhouse://user:password@host:port/db``."""

    clickhouse_reader_url: str | None = Field(default=None, repr=False)
    """URL the read-only SQL (``vidnexus sql`` without ``--write``, ``sql-server``) connects with to a
    ClickHouse server: a user with SELECT on the project's tables only. Default: ``clickhouse_url``
    with the user ``vnx_reader`` and no password (``vidnexus services up`` creates it)."""

    data_dir: Path = Path(".vnx/data")
    """Embedded data (chdb store, model weights trained on first use, profiles)."""

    work_dir: Path = Path(".vnx")
    """Working directory of the local dev services (broker and server data, logs, pid files)."""

    cache_dir: Path = Field(default_factory=lambda: Path.home() / ".cache" / "vidnexus")
    """Download cache shared between checkouts (Kafka jars, virtualenvs, pip cache)."""

    topic_prefix: str = "vnx"
    """Prefix of every topic name: ``<prefix>.frames``, ``<prefix>.stats``, …"""

    connect_timeout_s: float = 5.0
    """How long to wait for the broker or the ClickHouse server before giving up with an error."""

    kafka_port: int = 19092
    """Port of the local dev Kafka broker (`vidnexus services up`); its controller uses port+1."""

    kafka_jvm_opts: str | None = None
    """The local dev Kafka broker's JVM heap and garbage-collector options, space-separated, in place
    of its defaults (``vidnexus.services.kafka.BROKER_JVM_OPTS``); read by `vidnexus services up`."""

    clickhouse_tcp_port: int = 19000
    """Native-protocol port of the local dev ClickHouse server."""

    clickhouse_http_port: int = 18123
    """HTTP port of the local dev ClickHouse server."""

    give_up_s: float = Field(default=3600.0, ge=0)
    """How long a role rides out an outage of the broker or the store (retrying with backoff,
    reported as degraded) before it exits with an error; 0: never."""

    watchdog_s: float = Field(default=30.0, ge=0)
    """A consumer role (executor, sink, worker) that owns no partition for this long while its
    group has uncommitted records rejoins its group (logged); 0: no watchdog."""

    metrics_port: int = 0
    """Prometheus endpoint port for long-running roles (0 = disabled)."""

    health_port: int = Field(default=0, ge=0, le=65535)
    """Port on which a role answers ``GET /health`` with its health as JSON (``ok`` or ``degraded``,
    and why), on ``metrics_host`` (0 = disabled)."""

    metrics_host: str = "127.0.0.1"
    """Address the Prometheus endpoint binds to (0.0.0.0 inside a container)."""

    debug: bool = False
    """Tracebacks instead of one-line errors on the command line (same as ``--debug``)."""

    sql_token: str | None = Field(default=None, repr=False)
    """Bearer token of the read-only SQL endpoint (`vidnexus sql-server`), at least 16 characters."""

    console_token: str | None = Field(default=None, repr=False)
    """Read-only bearer token of the console's API (`vidnexus console`), at least 16 characters."""

    console_admin_token: str | None = Field(default=None, repr=False)
    """Admin bearer token of the console's API (changes: add, pause, resume, remove streams)."""

    game_specialize: bool = True
    """The game app specializes its item-icon step per streamer (WEG); ``0`` always runs the oracle.
    Read when the app is imported."""

    traffic_detector: str | None = None
    """A zoo detector (``ssdlite``) the traffic app runs on every sampled frame before its colour
    recognizer, compute only (random weights, boxes discarded); unset, empty or ``0``: off. Read when
    the app is imported."""

    dance_keypoints: str | None = None
    """A zoo keypoint model (``keypointrcnn``) the dance app runs on every sampled frame before its
    pose regressor, compute only (random weights, output discarded); unset, empty or ``0``: off. Read
    when the app is imported."""

    dance_pose: Literal["regressor", "blazepose"] = "regressor"
    """The dance app's pose model: ``regressor``, the project's 13-keypoint regressor for the
    stick-figure dancers it renders; ``blazepose``, Google's BlazePose (real weights) on the largest
    moving person of real footage, its landmarks mapped to the same 13 keypoints. Read when the app
    is imported."""

    peers_python: str | None = None
    """Python interpreter that can ``import pytriton, ray`` for `vidnexus bench peers` (`make test`
    sets it); unset: the newest complete peers virtualenv under ``cache_dir``."""

    bench_video: str | None = None
    """Video file `vidnexus bench ingest` decodes; unset: ``../shared/data/real/car-detection.mp4``."""

    @field_validator("topic_prefix")
    @classmethod
    def _prefix_is_a_topic_name(cls, v: str) -> str:
        import re

        if not re.fullmatch(r"[A-Za-z0-9._-]{1,100}", v):
            raise ValueError(
                f"topic_prefix {v!r} must be 1-100 characters of letters, digits, '.', '_' or '-'"
            )
        return v

    @field_validator("connect_timeout_s")
    @classmethod
    def _positive_timeout(cls, v: float) -> float:
        if v <= 0:
            raise ValueError(f"connect_timeout_s must be > 0 seconds, got {v}")
        return v


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment, with explicit overrides (CLI flags) taking precedence.

    Raises:
        ConfigError: a value is invalid; the message names the ``VNX_`` variable.
    """
    from pydantic import ValidationError

    from vidnexus.errors import ConfigError

    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]
    except ValidationError as e:
        problems = "; ".join(
            f"VNX_{'.'.join(str(p) for p in err['loc']).upper()}: {err['msg']}" for err in e.errors()
        )
        raise ConfigError(f"invalid configuration: {problems}") from None
