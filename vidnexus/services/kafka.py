"""A single-node Apache Kafka broker in KRaft mode, from the official jars on Maven Central."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import uuid
from importlib import resources
from typing import Callable

from vidnexus.config import Settings
from vidnexus.errors import ServiceError
from vidnexus.services.base import LocalService, run_checked

__all__ = ["KafkaService", "KAFKA_VERSION", "BROKER_JVM_OPTS", "java_major"]

_POM = "kafka-pom.xml"


def _pom_text() -> str:
    return resources.files("vidnexus.services").joinpath(_POM).read_text()


KAFKA_VERSION = re.search(r"<kafka.version>([^<]+)</kafka.version>", _pom_text()).group(1)  # type: ignore[union-attr]
"""The pinned broker version (3.9.x: serves every protocol version kafka-python and aiokafka use)."""


def java_major(java: str = "java") -> int:
    """Major version of ``java``; raises ServiceError when Java is missing."""
    if shutil.which(java) is None:
        raise ServiceError(
            "Java is not installed: the Kafka broker needs Java 17 or newer "
            "(Debian: apt-get install openjdk-17-jre-headless)"
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        raise ServiceError(f"cannot read the Java version from: {out.strip()[:200]}")
    major = int(m.group(1))
    return int(m.group(2)) if major == 1 and m.group(2) else major


BROKER_JVM_OPTS = ("-Xms768m", "-Xmx768m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                   "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent")
"""The broker JVM's heap and garbage-collector options (``Settings.kafka_jvm_opts`` replaces them):
Kafka's own performance flags (``kafka-run-class.sh``: G1 with a 20 ms pause target) on a fixed
768 MiB heap. Until 2026-12-02 the flags were ``-Xms256m -Xmx768m -XX:+UseG1GC``; ``vidnexus bench
broker-jvm`` put these ahead of them and of the parallel collector under vnx-kafka's tightest load
(``bench/results/broker-jvm-2026-12-02.json``, ``-2.json``: 1 and 26 requests missed of 11,520,
against 42 and 179; a shorter young collection budget, half the collector time, less broker CPU
per request)."""


def broker_threads(cpus: int | None = None) -> dict[str, int]:
    """The managed broker's request threads on a machine of ``cpus`` cores (default: this
    one's): one network thread per 4 cores and one request-handler thread per core, between 1 and
    2 and Kafka's own defaults (3 and 8, sized for a broker with a server to itself).

    On a 2-core box shared with an executor, its client and their Python threads, Kafka's defaults
    (11 threads handing each request over) cost CPU the executor needs: alternating brokers at
    120 req/s of 150 KB requests, SLO 50 ms, the single-model load of ``bench peers``
    (12 paired 10 s traces, 2026-12-02, issue 18's note), 1 network and 2 handler threads took
    2.37 ms of broker CPU per request against 2.59 (its collector 0.44 against 0.61) and kept
    0.84 of requests on time against 0.78 (8 of 12 pairs ahead; 1 and 1: 2.28 ms, 0.81 in 6).

    Example:
        >>> broker_threads(2), broker_threads(16)
        ({'num.network.threads': 1, 'num.io.threads': 2}, {'num.network.threads': 3, 'num.io.threads': 8})
    """
    n = max(1, cpus or os.cpu_count() or 1)
    return {"num.network.threads": max(1, min(3, n // 4)), "num.io.threads": max(2, min(8, n))}


class KafkaService(LocalService):
    """Kafka ``KAFKA_VERSION`` on 127.0.0.1:``kafka_port`` (controller on port+1)."""

    name = "kafka"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.work_dir / "kafka", settings.kafka_port)
        digest = hashlib.sha256(_pom_text().encode()).hexdigest()[:12]
        self.libs = settings.cache_dir / f"kafka-{KAFKA_VERSION}-{digest}" / "libs"
        self.jvm_opts = tuple(settings.kafka_jvm_opts.split()) if settings.kafka_jvm_opts else BROKER_JVM_OPTS

    def install(self) -> None:
        major = java_major()
        if major < 17:
            raise ServiceError(f"Kafka {KAFKA_VERSION} here needs Java 17 or newer; found Java {major}")
        marker = self.libs / ".complete"
        if marker.exists():
            return
        if shutil.which("mvn") is None:
            raise ServiceError(
                "Maven (`mvn`) is not installed: it resolves the Kafka jars from Maven Central "
                "(Debian: apt-get install maven)"
            )
        self.libs.mkdir(parents=True, exist_ok=True)
        pom = self.libs.parent / "pom.xml"
        pom.write_text(_pom_text())
        run_checked(
            [
                "mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                f"-DoutputDirectory={self.libs}", "-DincludeScope=runtime",
            ],
            f"resolving Kafka {KAFKA_VERSION} from Maven Central",
        )
        if not any(self.libs.glob("kafka_2.13-*.jar")):
            raise ServiceError(f"Maven finished but no kafka_2.13 jar is in {self.libs}")
        marker.write_text(KAFKA_VERSION)

    def _java(self, main: str, *args: str) -> list[str]:
        return [
            "java", *self.jvm_opts, "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{self.home / 'log4j.properties'}",
            "-cp", str(self.libs / "*"), main, *args,
        ]

    def command(self) -> list[str]:
        data = self.home / "data"
        props = self.home / "server.properties"
        ctl = self.port + 1
        props.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@{self.host}:{ctl}",
                    f"listeners=PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{ctl}",
                    f"advertised.listeners=PLAINTEXT://{self.host}:{self.port}",
                    "controller.listener.names=CONTROLLER",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    "inter.broker.listener.name=PLAINTEXT",
                    f"log.dirs={data}",
                    "num.partitions=4",
                    "auto.create.topics.enable=true",
                    "offsets.topic.replication.factor=1",
                    "offsets.topic.num.partitions=4",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                    "message.max.bytes=16777216",
                    "replica.fetch.max.bytes=16777216",
                    "log.retention.hours=24",
                    "log.segment.bytes=67108864",
                    # Request and reply topics keep seconds (``retention_s``, ``ephemeral_configs``):
                    # check every 5 s, not every 5 minutes, so their segments go soon after they expire.
                    "log.retention.check.interval.ms=5000",
                    *[f"{k}={v}" for k, v in broker_threads().items()],
                    "",
                ]
            )
        )
        (self.home / "log4j.properties").write_text(
            "log4j.rootLogger=WARN, stdout\n"
            "log4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            "log4j.logger.kafka.server.KafkaRaftServer=INFO\n"
            "log4j.logger.kafka.server.BrokerServer=INFO\n"
        )
        if not (data / "meta.properties").exists():
            data.mkdir(parents=True, exist_ok=True)
            run_checked(
                self._java(
                    "kafka.tools.StorageTool", "format", f"--cluster-id={_cluster_id()}", "-c", str(props),
                    "--ignore-formatted",
                ),
                "formatting the Kafka storage directory",
                timeout_s=120,
            )
        return self._java("kafka.Kafka", str(props))

    def ready(self) -> bool:
        # The port opens before the broker finishes starting; wait for its own "started" line
        # (the log is rotated at every start).
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return False
        return "Kafka Server started" in text and super().ready()


def _cluster_id(draw: Callable[[], bytes] = lambda: uuid.uuid4().bytes) -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding, never starting with
    '-' (as Kafka's own ``Uuid.randomUuid`` ensures): one id in 64 would otherwise start with it, and
    the storage tool would read it as an option ("argument --cluster-id/-t: expected one argument",
    a fresh machine's `services up` failing at random).

    Example:
        >>> ids = iter([bytes([251]) + bytes(15), bytes(16)])  # the first would start with "-"
        >>> _cluster_id(lambda: next(ids))
        'AAAAAAAAAAAAAAAAAAAAAA'
    """
    import base64

    while True:
        cid = base64.urlsafe_b64encode(draw()).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid
