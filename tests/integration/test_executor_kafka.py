"""Two models served by a `vidnexus executor` process over the real broker (one of them layer-wise,
``--layerwise``); replies reach the right callers; malformed requests are dead-lettered; stats are
published."""

import math
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

import numpy as np
import pytest

from vidnexus.config import Settings
from tests.integration.conftest import kafka_bus_of
from vidnexus.gpu_executor.client import ExecutorClient
from vidnexus.contracts.stats import decode_stats
from vidnexus.contracts.topics import Topics
from tests.integration.test_kafka_bus import topic_configs


@pytest.fixture
def executor_proc(kafka_bootstrap, tmp_path):
    prefix = f"it{uuid.uuid4().hex[:8]}"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, VNX_BUS="kafka", VNX_KAFKA_BOOTSTRAP=kafka_bootstrap, VNX_TOPIC_PREFIX=prefix,
               VNX_DATA_DIR=str(tmp_path / "data"), VNX_METRICS_PORT=str(port))
    p = subprocess.Popen([sys.executable, "-m", "vidnexus", "executor", "-s", "lenet5:300",
                          "-s", "mobilenet_v3_small:2000", "--threads", "1", "--layerwise", "mobilenet_v3_small:4"],
                         env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 120
    line, lines = "", []
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        lines.append(line)
        if "executor: serving" in line or (not line and p.poll() is not None):
            break
    assert "executor: serving" in line, f"executor did not start: {line} {p.stderr.read() if p.poll() is not None else ''}"
    assert any("mobilenet_v3_small served layer-wise (layerwise) in 4 groups" in x for x in lines), lines
    yield Settings(bus="kafka", kafka_bootstrap=kafka_bootstrap, topic_prefix=prefix, metrics_port=port)
    p.terminate()
    assert p.wait(timeout=60) == 0


def test_two_models_replies_routed_to_the_right_callers(executor_proc):
    settings = executor_proc
    bus = kafka_bus_of("confluent", settings.kafka_bootstrap)
    a, b = ExecutorClient(bus, settings, "a"), ExecutorClient(bus, settings, "b")
    digit = np.zeros((1, 28, 28), np.float32)
    image = np.zeros((3, 224, 224), np.float32)
    sent = []
    for i in range(12):
        for client, name in ((a, "a"), (b, "b")):
            sent.append((name, "lenet5-300ms", client.submit("lenet5-300ms", digit, slo_s=5.0, frame_no=i)))
            if i % 3 == 0:
                sent.append((name, "mobilenet_v3_small-2000ms",
                             client.submit("mobilenet_v3_small-2000ms", image, slo_s=20.0, frame_no=i)))
    # Requests with no deadline (a backfill worker's) travel as deadline inf and run in the
    # session's background twin, in the slack of the live requests.
    background = [a.submit("lenet5-300ms", digit, deadline_wall=math.inf, expires_wall=a.wall() + 60)
                  for _ in range(5)]
    bus.flush()
    replies = [(name, sess, f.result(timeout=90)) for name, sess, f in sent]
    assert [(r.ok, len(r.output)) for r in (f.result(timeout=90) for f in background)] == [(True, 10)] * 5
    for name, sess, r in replies:
        assert r.ok, r.reason
        assert len(r.output) == (10 if sess.startswith("lenet5") else 1000)  # each reply on its request's future
        assert r.latency_s > 0  # the caller's view: submit to reply, Kafka hops included
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{settings.metrics_port}/metrics", timeout=10).read().decode()
    served = [line for line in metrics.splitlines() if line.startswith('vnx_requests_total{session="lenet5-300ms"}')]
    assert served and float(served[0].split()[-1]) >= 24
    assert 'vnx_batch_size_count{session="mobilenet_v3_small-2000ms"}' in metrics
    # Each session's request topic keeps what its deadlines make worth keeping (twice the SLO, ≥ 10 s).
    topics = Topics(settings.topic_prefix)
    assert topic_configs(settings.kafka_bootstrap, topics.requests("lenet5-300ms"))["retention.ms"] == "10000"
    assert topic_configs(settings.kafka_bootstrap, topics.requests("mobilenet_v3_small-2000ms"))["retention.ms"] == "10000"
    a.close(), b.close()
    bus.close()


def test_malformed_request_is_dead_lettered_and_stats_are_published(executor_proc):
    settings = executor_proc
    bus = kafka_bus_of("confluent", settings.kafka_bootstrap)
    bus.publish(Topics(settings.topic_prefix).requests("lenet5-300ms"), b"junk", b"\x00not msgpack")
    bus.flush()
    topics = Topics(settings.topic_prefix)
    dlq = bus.subscribe([topics.dead_letter("requests")], group=None)
    stats = bus.subscribe([topics.stats], group=None)
    got_dead, got_stats, deadline = [], [], time.monotonic() + 60
    while (not got_dead or not got_stats) and time.monotonic() < deadline:
        got_dead += dlq.poll(timeout_s=0.5)
        got_stats += stats.poll(timeout_s=0.5)
    assert got_dead and dict(got_dead[0].headers)["reason"].startswith(b"malformed req message")
    doc = decode_stats(got_stats[0].value)
    assert {s.session for s in doc.sessions} == {"lenet5-300ms", "mobilenet_v3_small-2000ms"}
    assert set(doc.targets) == {"lenet5-300ms", "mobilenet_v3_small-2000ms"}
    dlq.close(), stats.close()
    bus.close()
