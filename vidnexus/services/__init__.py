"""Local development services: a real Kafka broker (KRaft) and a real ClickHouse server on loopback.

One code path serves ``vidnexus services up|down|status``, ``make test`` and CI. Everything lives
under ``settings.work_dir`` (data, logs, pid files); downloads are cached under
``settings.cache_dir``.
"""

from typing import TYPE_CHECKING

from vidnexus.services.base import LocalService, ServiceStatus
from vidnexus.services.clickhouse import ClickHouseService
from vidnexus.services.kafka import KafkaService

if TYPE_CHECKING:
    from vidnexus.config import Settings

__all__ = ["LocalService", "ServiceStatus", "KafkaService", "ClickHouseService", "all_services"]


def all_services(settings: "Settings") -> list[LocalService]:
    """Kafka then ClickHouse, configured from ``settings``."""
    return [KafkaService(settings), ClickHouseService(settings)]
