"""The managed broker's command line (no broker started)."""

from vidnexus.config import Settings
from vidnexus.services.kafka import BROKER_JVM_OPTS, KafkaService, broker_threads


def _java(settings: Settings) -> tuple[list[str], list[str]]:
    """The broker's command line and the JVM options in it (between ``java`` and the first -D)."""
    cmd = KafkaService(settings)._java("kafka.Kafka", "server.properties")
    return cmd, cmd[1:cmd.index("-Djava.awt.headless=true")]


def test_the_broker_runs_with_its_default_heap_and_collector(tmp_path):
    assert _java(Settings(work_dir=tmp_path, cache_dir=tmp_path))[1] == list(BROKER_JVM_OPTS)


def test_kafka_jvm_opts_replace_the_brokers_heap_and_collector_options(tmp_path):
    cmd, opts = _java(Settings(work_dir=tmp_path, cache_dir=tmp_path, kafka_jvm_opts=" -Xms1g  -Xmx1g -XX:+UseZGC "))
    assert opts == ["-Xms1g", "-Xmx1g", "-XX:+UseZGC"]
    assert "-XX:+UseG1GC" not in cmd and cmd[-2:] == ["kafka.Kafka", "server.properties"]


def test_the_broker_gets_request_threads_sized_to_the_machine(tmp_path):
    assert broker_threads(1) == {"num.network.threads": 1, "num.io.threads": 2}
    assert broker_threads(2) == {"num.network.threads": 1, "num.io.threads": 2}
    assert broker_threads(8) == {"num.network.threads": 2, "num.io.threads": 8}
    assert broker_threads(64) == {"num.network.threads": 3, "num.io.threads": 8}
    service = KafkaService(Settings(work_dir=tmp_path, cache_dir=tmp_path))
    (service.home / "data").mkdir(parents=True)
    (service.home / "data" / "meta.properties").write_text("")  # formatted already: no storage tool run
    service.command()
    lines = (service.home / "server.properties").read_text().splitlines()
    written = [line for line in lines if line.startswith("num.") and "threads" in line]
    assert written == [f"{k}={v}" for k, v in broker_threads().items()]
