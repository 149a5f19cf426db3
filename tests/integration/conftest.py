"""Integration tests talk to the real Kafka broker and ClickHouse server that `make test` starts.

A missing service is a failure, never a skip: start them with `vidnexus services up`.
"""

import os
import socket
import uuid

import pytest

from vidnexus.connectors.clickhouse_store import parse_clickhouse_url

pytestmark = pytest.mark.integration


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    addr = os.environ.get("VNX_KAFKA_BOOTSTRAP", "127.0.0.1:19092")
    host, port = addr.split(",")[0].rsplit(":", 1)
    if not _reachable(host, int(port)):
        pytest.fail(f"Kafka is not running at {addr}: run `vidnexus services up` (make test does)")
    return addr


@pytest.fixture(scope="session")
def clickhouse_url() -> str:
    url = os.environ.get("VNX_CLICKHOUSE_URL", "clickhouse://default:@127.0.0.1:19000/default")
    p = parse_clickhouse_url(url)
    if not _reachable(p["host"], p["port"]):
        pytest.fail(f"ClickHouse is not running at {p['host']}:{p['port']}: run `vidnexus services up`")
    return url


KAFKA_DRIVERS = ("confluent", "kafka-python")


def kafka_bus_of(driver: str, bootstrap: str, **kw):
    """A Bus on the test broker with the given driver (both are supported: the Bus tests run on each)."""
    if driver == "kafka-python":
        from vidnexus.connectors.kafka_bus import KafkaBus

        return KafkaBus(bootstrap, timeout_s=10, **kw)
    from vidnexus.connectors.confluent_bus import ConfluentBus

    return ConfluentBus(bootstrap, timeout_s=10, **kw)


@pytest.fixture(params=KAFKA_DRIVERS)
def kafka_driver(request) -> str:
    return request.param


@pytest.fixture
def kafka_bus(kafka_bootstrap, kafka_driver):
    bus = kafka_bus_of(kafka_driver, kafka_bootstrap)
    yield bus
    bus.close()


@pytest.fixture
def topic() -> str:
    return f"vnx-test-{uuid.uuid4().hex[:10]}"
