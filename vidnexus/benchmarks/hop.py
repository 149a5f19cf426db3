"""What one DNN call adds over the bus: the request → reply round trip through the real broker,
with the executor's work taken out.

The client is the executor client the workers use (:class:`~vidnexus.gpu_executor.client.ExecutorClient`:
the request and reply contracts, its reply topic and listener thread); the far end is an echo
process that reads the session's requests topic in a consumer group, decodes each request and
publishes its reply at once (a 10-float output, as a classifier's logits), the way the executor
role reads and answers, without a model. Requests are sent open-loop (one every 1/rate s, whatever
came back) for a fixed time, each with a ``uint8`` payload of the cell's size; a request without a
reply 10 s after it was sent counts as lost. Each arm (driver, linger) first sends ``WARM_CELL`` for
a while and leaves it out of its figures, so that no cell measures a broker or client still warming.

Per cell (driver × rate × payload): round-trip p50/p99/max over the answered requests, the answered
fraction, and the CPU time per request of the client process, the echo process and the broker (the
local broker's JVM, found by its command line; absent when the broker is elsewhere).

``python -m vidnexus.benchmarks.hop --echo PREFIX SESSION`` runs the echo end (the driver is
``VNX_KAFKA_DRIVER``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from concurrent.futures import Future
from functools import partial
from typing import Any

import numpy as np

from vidnexus.benchmarks.broker_topics import BrokerTopics
from vidnexus.benchmarks.machine import machine_info
from vidnexus.benchmarks.procstat import broker_pid, cpu_by_process, jvm_flags
from vidnexus.errors import ConnectorError, VidnexusError
from vidnexus.roles.heap import settle_heap

__all__ = ["run", "echo", "DRIVERS"]

DRIVERS = ("confluent", "kafka-python")
RATES = (100, 1000)
PAYLOADS_KB = (1, 20, 150)
SWITCH_CELLS = ((1400, 20), (2000, 20))
"""Full runs add these cells for the confluent driver (kafka-python cannot keep up there): around
the rate where its default moves from the eager producer to the batching one (``LingerSwitch``)."""
LINGERS_MS = (0.0, 0.5)
"""Full runs also measure the confluent driver with each of these producer lingers fixed
(``VNX_KAFKA_LINGER_MS``), beside its default, which switches between 0 and 0.5 ms by rate."""
WARM_CELL = (1000, 1)
"""Each arm first sends this (req/s, KB) open-loop, in chunks of ``warm_s``, and leaves it out of
its figures: a broker started a minute before a run spent 5-7 ms of CPU per request at 100 req/s
and gave its first 1,000 req/s cell a p99 of 270 ms (hop-2026-11-29-4.json; on a warm broker in
hop-2026-11-29-3.json, 1.5 ms and 6 ms). A just-started broker fell seconds behind for the first
20-40 s of 1,000 req/s, its JIT still compiling, so one fixed warm-up is too short for a cold broker
and needlessly long for a warm one. 1 KB, because kafka-python keeps up there (it falls seconds
behind at 1,000 req/s of 20 KB)."""
WARM_SETTLED_P99_MS = 50.0
"""The warm-up ends after two chunks in a row answer everything with a p99 under this (a warm
broker: 6-24 ms; a cold one: 270-4,000 ms), or after ``WARM_MAX_S``."""
WARM_MAX_S = 120.0
SESSION = "hop-echo"
LOST_AFTER_S = 10.0
REQUEST_RETENTION_S = 3 * LOST_AFTER_S
"""How long the broker keeps the echo's requests (they are lost after ``LOST_AFTER_S``)."""


def echo(prefix: str, session: str, stop: threading.Event | None = None) -> None:
    """Answer every request of ``session`` at once (until ``stop`` or SIGTERM)."""
    import signal

    from vidnexus.config import load_settings
    from vidnexus.connectors.factory import open_bus
    from vidnexus.contracts.replies import Reply
    from vidnexus.contracts.requests import decode_request, encode_reply
    from vidnexus.contracts.topics import Topics
    from vidnexus.errors import CodecError

    stop = stop or threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    settings = load_settings()
    bus = open_bus(settings.model_copy(update={"topic_prefix": prefix}))
    topic = Topics(prefix).requests(session)
    consumer = bus.subscribe([topic], group=f"{prefix}-echo", from_beginning=True)
    out = np.zeros(10, np.float32).tolist()
    settle_heap()  # as the executor role does once it has started
    print("echo: ready", flush=True)
    seen, t0, said = 0, time.monotonic(), 0.0
    try:
        while not stop.is_set():
            for m in consumer.poll(timeout_s=0.05, max_records=500):
                seen += 1
                try:
                    req = decode_request(m.value)
                except CodecError:
                    continue
                bus.publish(req.reply_to, req.request_id.encode(),
                            encode_reply(req.request_id, req.session_id, [Reply(True, out, None, 0.0, 1)] * len(req.inputs)))
            if time.monotonic() - said > 5:  # what the bench prints if the echo never answers
                said = time.monotonic()
                print(f"echo: {said - t0:.0f} s, {seen} requests, assigned {sorted(consumer.assignment())}",
                      file=sys.stderr, flush=True)
    finally:
        consumer.close()
        bus.close()


def _cell(client: Any, rate: int, kb: int, seconds: float, pids: dict[str, int | None]) -> dict[str, Any]:
    """Send ``rate`` requests/s of ``kb`` KB for ``seconds``; wait for the replies."""
    from vidnexus.gpu_executor.metrics import percentile

    payload = np.random.default_rng(kb).integers(0, 255, kb * 1024, dtype=np.uint8)
    n = int(rate * seconds)
    # Each reply's latency lands in an array and its future is let go: 10,000 futures and replies
    # kept to the end made the process's heap the benchmark's, and Python's full collections of it
    # paused the client's listener thread for 30-115 ms (p99 13-96 ms on 2026-11-29, 7-15 with
    # the collector off). A worker keeps only its requests in flight.
    ms_of = np.full(n, np.nan)
    left, all_in, lock = n, threading.Event(), threading.Lock()

    def record(i: int, f: Future[Any]) -> None:
        nonlocal left
        r = f.result()
        if r.ok:
            ms_of[i] = r.latency_s * 1000
        with lock:
            left -= 1
            if not left:
                all_in.set()

    settle_heap()  # what the run built so far is not this cell's to collect (as the executor role freezes its own)
    before = cpu_by_process(pids)
    cpu0 = time.process_time()
    t0 = time.monotonic()
    behind = 0.0
    for i in range(n):
        due = t0 + i / rate
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        else:
            behind = max(behind, -wait)
        client.submit(SESSION, payload, slo_s=60.0, expires_wall=client.wall() + LOST_AFTER_S).add_done_callback(
            partial(record, i))
    flush_error = None
    try:
        client.flush()
    except ConnectorError as e:
        # The driver could not hand its backlog to the broker in time (kafka-python at 1,000 req/s
        # of 150 KB): the cell is still measured, and a request not answered by its expiry is a miss.
        flush_error = str(e)
    send_s = time.monotonic() - t0
    if not all_in.wait(LOST_AFTER_S + 5):  # every request ends by its expiry, answered or not
        raise VidnexusError(f"{left} of {n} requests neither answered nor expired {LOST_AFTER_S + 5:g} s after sending")
    cpu = {"client": time.process_time() - cpu0}
    after = cpu_by_process(pids)
    cpu.update({k: after[k] - before[k] for k in before if k in after})
    ms = sorted(ms_of[~np.isnan(ms_of)].tolist())
    answered = len(ms) / n
    return {
        "rate_rps": rate, "payload_kb": kb, "requests": n, "seconds": seconds,
        "sent_rate_rps": round(n / send_s, 1), "sender_behind_max_ms": round(behind * 1000, 1),
        "answered_fraction": round(answered, 4), "flush_error": flush_error,
        "p50_ms": round(percentile(ms, 0.50), 2) if ms else None,
        "p99_ms": round(percentile(ms, 0.99), 2) if ms else None,
        "max_ms": round(ms[-1], 2) if ms else None,
        "cpu_ms_per_request": {k: round(v * 1000 / n, 3) for k, v in cpu.items()},
    }


def _warm(client: Any, chunk_s: float, max_s: float, pids: dict[str, int | None]) -> list[dict[str, Any]]:
    """``WARM_CELL`` in chunks of ``chunk_s`` until two in a row settle (``WARM_SETTLED_P99_MS``) or
    ``max_s`` has passed; each chunk's row, the last one saying whether the warm-up settled."""
    rows: list[dict[str, Any]] = []
    calm = 0
    while calm < 2 and (not rows or len(rows) * chunk_s < max_s):  # one chunk at least
        r = _cell(client, *WARM_CELL, chunk_s, pids)
        ok = r["answered_fraction"] == 1.0 and r["p99_ms"] is not None and r["p99_ms"] < WARM_SETTLED_P99_MS
        calm = calm + 1 if ok else 0
        rows.append(dict(r, warm_up=True))
    rows[-1]["warm_settled"] = calm >= 2
    return rows


def _driver(driver: str, cells: list[tuple[int, int]], seconds: float, bootstrap: str,
            linger_ms: float | None = None, warm_s: float = 0.0,
            warm_max_s: float = WARM_MAX_S) -> list[dict[str, Any]]:
    """Every cell through ``driver``; ``linger_ms`` fixes both ends' producer linger (None: the
    driver's default, whatever the environment says). The arm's warm-up chunks (``WARM_CELL``,
    ``warm_s`` each, ``"warm_up": True``) come first when ``warm_s`` > 0."""
    from vidnexus.config import Settings
    from vidnexus.connectors.factory import open_bus
    from vidnexus.contracts.topics import Topics
    from vidnexus.gpu_executor.client import ExecutorClient

    prefix = f"hop{uuid.uuid4().hex[:8]}"
    settings = Settings(bus="kafka", kafka_bootstrap=bootstrap, topic_prefix=prefix).model_copy(
        update={"kafka_driver": driver, "kafka_linger_ms": linger_ms})
    bus = open_bus(settings)
    # Requests are worthless once they expire; a full run writes ~1.5 GB of them per 150 KB cell
    # at 1,000 req/s, which a topic with the broker's default retention kept for a week (62 GB of
    # hop requests filled this box's disk on 2026-11-29). The topic also goes when the arm ends.
    bus.create_topic(Topics(prefix).requests(SESSION), 1, retention_s=REQUEST_RETENTION_S)
    env = dict(os.environ, VNX_BUS="kafka", VNX_KAFKA_BOOTSTRAP=bootstrap, VNX_KAFKA_DRIVER=driver)
    env.pop("VNX_KAFKA_LINGER_MS", None)
    if linger_ms is not None:
        env["VNX_KAFKA_LINGER_MS"] = str(linger_ms)
    proc = subprocess.Popen([sys.executable, "-m", "vidnexus.benchmarks.hop", "--echo", prefix, SESSION], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The echo's stderr (its progress lines, the Kafka client's own log) is read all along, so a
    # chatty client can never fill the pipe and block the echo; its tail explains a failure.
    err: deque[str] = deque(maxlen=40)
    assert proc.stderr is not None
    threading.Thread(target=lambda: err.extend(proc.stderr or ()), daemon=True).start()
    client = None
    out = []
    try:
        assert proc.stdout is not None
        if "echo: ready" not in proc.stdout.readline():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
            raise VidnexusError(f"the {driver} echo did not start: {''.join(err)}"[-2000:])
        client = ExecutorClient(bus, settings, name=f"hop-{driver}")
        # Warm: the echo's group has its partition and both ends have their connections.
        warm = np.zeros(1024, np.uint8)
        end, tries, reasons = time.monotonic() + 60, 0, set()
        while time.monotonic() < end:
            tries += 1
            first = client.submit(SESSION, warm, expires_wall=client.wall() + 2).result(timeout=5)
            if first.ok:
                break
            reasons.add(str(first.reason))
        else:
            raise VidnexusError(f"the {driver} echo answered none of {tries} requests in 60 s ({', '.join(sorted(reasons))}); "
                                f"its last lines:\n{''.join(err)}"[-3000:])
        for _ in range(50):
            client.submit(SESSION, warm, expires_wall=client.wall() + 5).result(timeout=10)
        pids = {"echo": proc.pid, "broker": broker_pid(bootstrap)}
        if warm_s > 0:
            out += [dict(r, driver=driver, linger_ms=linger_ms)
                    for r in _warm(client, warm_s, warm_max_s, pids)]
        for rate, kb in cells:
            switches = getattr(bus, "switches", None)  # the confluent driver's, adaptive linger only
            r = _cell(client, rate, kb, seconds, pids)
            # How often the client's records moved between its eager and batching producers.
            r["client_producer_switches"] = None if switches is None else getattr(bus, "switches") - switches
            r["driver"] = driver
            r["linger_ms"] = linger_ms
            r["warm_up"] = False
            out.append(r)
    finally:
        if client is not None:
            client.close()
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        bus.close()
        try:
            left: int | None = BrokerTopics(bootstrap).delete_prefix(prefix)
        except Exception as e:  # the broker did not answer: the topics stay, nothing else is wrong
            print(f"bench hop: the {driver} arm's topics ({prefix}.*) were not deleted: {e}", file=sys.stderr)
            left = None
        for r in out:
            r["topics_left"] = left  # the arm's topics the broker still lists after it deleted them
    return out


def run(quick: bool, console: Any) -> dict[str, Any]:
    from rich.table import Table

    from vidnexus.config import load_settings

    settings = load_settings()
    payloads = (20,) if quick else PAYLOADS_KB
    seconds = 2.0 if quick else 10.0
    warm_s, warm_max_s = (1.0, 6.0) if quick else (5.0, WARM_MAX_S)
    cells = [(rate, kb) for rate in RATES for kb in payloads]
    results = []
    # confluent at its default, then at each fixed linger, then kafka-python: its cells at 1,000 req/s
    # leave the broker seconds of backlog, which would weigh on whatever ran next.
    lingers = () if quick else LINGERS_MS
    arms = [("confluent", None)] + [("confluent", linger) for linger in lingers] + [("kafka-python", None)]
    assert {d for d, _ in arms} == set(DRIVERS)
    for driver, linger in arms:
        extra = list(SWITCH_CELLS) if driver == "confluent" and not quick else []
        results += _driver(driver, cells + extra, seconds, settings.kafka_bootstrap, linger_ms=linger, warm_s=warm_s,
                           warm_max_s=warm_max_s)
    warm_ups = [r for r in results if r["warm_up"]]
    results = [r for r in results if not r["warm_up"]]
    table = Table("driver", "req/s", "KB", "answered", "p50 ms", "p99 ms", "max ms", "CPU ms/req client",
                  "echo", "broker", title="round trip one DNN call adds over the bus (echo, no model)")
    for r in results:
        cpu = r["cpu_ms_per_request"]
        label = r["driver"] if r["linger_ms"] is None else f"{r['driver']} linger {r['linger_ms']:g} ms"
        table.add_row(label, str(r["rate_rps"]), str(r["payload_kb"]), f"{r['answered_fraction']:.1%}",
                      str(r["p50_ms"]), str(r["p99_ms"]), str(r["max_ms"]), f"{cpu['client']:.2f}",
                      f"{cpu.get('echo', 0):.2f}", f"{cpu['broker']:.2f}" if "broker" in cpu else "—")
    console.print(table)
    for r in results:
        if r["flush_error"]:
            console.print(f"{r['driver']} at {r['rate_rps']} req/s, {r['payload_kb']} KB: {r['flush_error']} "
                          "(its requests count as answered only if their replies came)")
    default = settings.kafka_driver

    def cell(driver: str, rate: int, kb: int, linger_ms: float | None = None) -> dict[str, Any]:
        return next(r for r in results if r["driver"] == driver and r["rate_rps"] == rate and r["payload_kb"] == kb
                    and r["linger_ms"] == linger_ms)

    per_arm = {(r["driver"], r["linger_ms"]): r["topics_left"] for r in results}
    main = cell(default, 1000, 20)
    if main["answered_fraction"] < 0.99 or main["p99_ms"] is None:
        raise VidnexusError(f"{default} at 1000 req/s, 20 KB answered only {main['answered_fraction']:.1%}")
    summary: dict[str, Any] = {
        "default_driver": default,
        "p50_ms_1000rps_20kb": main["p50_ms"],
        "p99_ms_1000rps_20kb": main["p99_ms"],
        "p50_ms_100rps_20kb": cell(default, 100, 20)["p50_ms"],
        "p99_ms_100rps_20kb": cell(default, 100, 20)["p99_ms"],
        # the run's topics the broker still lists at the end (None: a broker did not answer)
        "topics_left": None if None in per_arm.values() else sum(per_arm.values()),
        # every arm's warm-up settled before its cells (False: some cell may measure a cold broker)
        "warm_ups_settled": all(r["warm_settled"] for r in warm_ups if "warm_settled" in r),
    }
    for driver in DRIVERS:
        c = cell(driver, 1000, 20)
        summary[f"{driver}_answered_1000rps_20kb"] = c["answered_fraction"]
        summary[f"{driver}_p99_ms_1000rps_20kb"] = c["p99_ms"]
    switch_rates = () if quick else tuple(rate for rate, _ in SWITCH_CELLS)
    for rate in switch_rates if default == "confluent" else ():
        summary[f"p50_ms_{rate}rps_20kb"] = cell(default, rate, 20)["p50_ms"]
        summary[f"p99_ms_{rate}rps_20kb"] = cell(default, rate, 20)["p99_ms"]
    for linger in lingers:  # the default's choice against each fixed linger, at every rate
        for rate in RATES + switch_rates:
            c = cell("confluent", rate, 20, linger)
            summary[f"confluent_linger{linger:g}_p50_ms_{rate}rps_20kb"] = c["p50_ms"]
            summary[f"confluent_linger{linger:g}_p99_ms_{rate}rps_20kb"] = c["p99_ms"]
    console.print(f"summary: {summary}")
    return {"name": "hop", "machine": machine_info(),
            "config": {"quick": quick, "seconds_per_cell": seconds,
                       "warm_up": {"rate_rps": WARM_CELL[0], "payload_kb": WARM_CELL[1], "chunk_s": warm_s,
                                   "settled_p99_ms": WARM_SETTLED_P99_MS, "max_s": warm_max_s,
                                   "note": "each arm, before its cells, until two chunks in a row have p99 under "
                                           "settled_p99_ms; its rows are warm_ups, out of the figures"},
                       "rates_rps": list(RATES),
                       "payloads_kb": list(payloads), "drivers": list(DRIVERS),
                       "confluent_switch_cells": [] if quick else [list(c) for c in SWITCH_CELLS],
                       "confluent_fixed_lingers_ms": list(lingers), "lost_after_s": LOST_AFTER_S,
                       "far_end": "echo process (decode request, publish reply; no model)",
                       "client": "ExecutorClient (the workers' client)", "broker": settings.kafka_bootstrap,
                       "broker_jvm": jvm_flags(broker_pid(settings.kafka_bootstrap))},
            "results": results, "warm_ups": warm_ups, "summary": summary}


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--echo":
        echo(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: python -m vidnexus.benchmarks.hop --echo PREFIX SESSION")
