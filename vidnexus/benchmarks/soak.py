"""Soak: the traffic app distributed over the real broker and ClickHouse server for a set time at
80% of its measured capacity, watching for what grows.

The deployment is the app tests' (:mod:`vidnexus.benchmarks.app_deployment`): the executor, the
worker and the sink each run as their own process (with fixed sessions no scheduler is needed),
and this process publishes the frames at their real pace. The load defaults to 80% of the 205
sampled frames/s at which traffic held 100% of its frames within its 400 ms SLO over Kafka
(``bench/results/apps-kafka-2026-11-23.json``): 33 synthetic cameras at 5 frames/s. A cycle of
each camera's frames is rendered once and replayed, with new frame numbers and presentation
times, for the whole run (rendering 30 minutes ahead would need gigabytes).

Every few seconds it samples each role's resident memory and open file descriptors (its process
and any children, from ``/proc/PID/status`` and ``/proc/PID/fd``) and the topics on the broker
(all, and the run's own prefix). After the run, ``vnx_frames`` gives the SLO attainment of the
frames that finished in each sampling interval (outcome time = ingest time + latency) and over the
run after warm-up (the first 20%), where a frame sent then without an outcome row counts as a miss
and as lost. Growth is measured from the end of warm-up to the end of the run.

Summary: ``rss_growth_pct_max`` (the largest over the roles), ``fd_growth_max``,
``topics_start``/``topics_end`` (the broker's; other users of the broker move these),
``own_topics_start``/``own_topics_end`` (the run's prefix), ``reply_topics_left`` (the run's reply
topics still there after its roles stopped), ``slo_attainment``, ``frames``, ``frames_lost``.
Needs the broker and the server: ``vidnexus services up``.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

from vidnexus.benchmarks.app_deployment import RenderedFrame
from vidnexus.benchmarks.broker_topics import BrokerTopics, delete_topics
from vidnexus.benchmarks.machine import machine_info
from vidnexus.errors import VidnexusError

__all__ = ["run", "rss_kib", "growth_pct", "at_warmup_and_end", "looped", "streams_for", "attainment",
           "CAPACITY_FRAMES_PER_S", "LOAD_FRACTION"]

CAPACITY_FRAMES_PER_S = 205.0
"""Traffic over Kafka at 100% within its SLO (bench/results/apps-kafka-2026-11-23.json, 41 streams)."""
LOAD_FRACTION = 0.8
SAMPLE_FPS = 5.0
FULL_S, QUICK_S = 1800.0, 75.0
"""Seconds of load: 30 minutes; ``--quick`` about two minutes in all with the roles' start and stop."""
WARMUP_FRACTION = 0.2
DRAIN_S = 60.0
"""How long the last frames may take to reach ``vnx_frames`` after the load stops."""
APP = "traffic"


# -- pure measurements -------------------------------------------------------------------------
def rss_kib(status: str) -> int:
    """Resident set size in KiB from the text of ``/proc/PID/status`` (0 for a zombie, which has none).

    Example:
        >>> rss_kib("Name:\\tpython\\nVmRSS:\\t  123456 kB\\nThreads:\\t4\\n")
        123456
    """
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def growth_pct(start: float, end: float) -> float:
    """Growth from ``start`` to ``end`` in percent of ``start`` (0 when ``start`` is 0).

    Example:
        >>> growth_pct(200.0, 210.0)
        5.0
    """
    return 0.0 if start <= 0 else round(100.0 * (end - start) / start, 2)


def at_warmup_and_end(series: Sequence[tuple[float, float]], warmup_s: float) -> tuple[float, float]:
    """The value of the first sample at or after ``warmup_s`` and of the last one, from
    ``(seconds into the run, value)`` pairs in time order.

    Example:
        >>> at_warmup_and_end([(0, 1.0), (5, 2.0), (10, 3.0), (15, 4.0)], warmup_s=4)
        (2.0, 4.0)

    Raises:
        VidnexusError: no sample (or none at or after ``warmup_s``).
    """
    after = [v for t, v in series if t >= warmup_s]
    if not after:
        raise VidnexusError(f"no sample at or after the warm-up's end ({warmup_s:g} s) among {len(series)}")
    return after[0], after[-1]


def looped(frames: Sequence[RenderedFrame], period_s: float, seconds: float) -> Iterator[RenderedFrame]:
    """``frames`` (one cycle, ``pts`` in [0, ``period_s``)) replayed until ``seconds``: cycle ``c``
    shifts presentation times by ``c * period_s`` and frame numbers past every number of the cycle
    before, so each stream's frame numbers keep rising.

    Example:
        >>> cycle = [(0.0, "a", (0, (1, 1, 3), b""), {}), (0.5, "a", (2, (1, 1, 3), b""), {})]
        >>> [(pts, f[0]) for pts, _, f, _ in looped(cycle, 1.0, 2.5)]
        [(0.0, 0), (0.5, 2), (1.0, 3), (1.5, 5), (2.0, 6)]
    """
    if not frames or period_s <= 0:
        return
    span = max(f[2][0] for f in frames) + 1
    cycle = 0
    while True:
        for pts, sid, (index, shape, jpeg), tags in frames:
            t = pts + cycle * period_s
            if t >= seconds:
                return
            yield t, sid, (index + cycle * span, shape, jpeg), tags
        cycle += 1


def streams_for(frames_per_s: float, sample_fps: float) -> int:
    """Cameras at ``sample_fps`` whose frames come closest to ``frames_per_s`` (at least one).

    Example:
        >>> streams_for(0.8 * 205, 5.0)
        33
    """
    return max(1, round(frames_per_s / sample_fps))


def attainment(in_slo: int, frames: int) -> float | None:
    """Fraction of ``frames`` answered within the SLO (None without frames)."""
    return None if frames <= 0 else round(in_slo / frames, 4)


# -- what the sampler reads --------------------------------------------------------------------
def _process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (a role's worker processes, if it has any)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


@dataclass(frozen=True, slots=True)
class RoleSample:
    """A role's resident memory and open file descriptors, summed over its process tree."""

    rss_kib: int
    fds: int
    processes: int


def _sample_role(pid: int) -> RoleSample | None:
    """None when the role's process is gone."""
    rss = fds = n = 0
    for p in _process_tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                rss += rss_kib(f.read())
            fds += len(os.listdir(f"/proc/{p}/fd"))
            n += 1
        except OSError:
            if p == pid:
                return None
    return RoleSample(rss, fds, n)


# -- the run -----------------------------------------------------------------------------------
def _interval_attainment(store: Any, where: str, t0_wall: float, every_s: float, slo_ms: float,
                         ) -> dict[int, tuple[int, int]]:
    """Interval index → (frames whose outcome came in it, of them ok within the SLO); interval
    ``i`` is ``[t0 + i * every, t0 + (i + 1) * every)`` on the wall clock."""
    rows = store.query(
        f"SELECT toInt64(floor((ingest_ts + latency_ms / 1000 - {t0_wall!r}) / {every_s!r})) AS i, count(), "
        f"countIf(status = 'ok' AND latency_ms <= {slo_ms!r}) FROM vnx_frames FINAL WHERE {where} "
        "GROUP BY i ORDER BY i").rows
    return {int(i): (int(n), int(ok)) for i, n, ok in rows}


def _samples_until(seconds: float, every_s: float, t0: float, roles: dict[str, int], topics: BrokerTopics,
                   prefix: str, console: Any) -> list[dict[str, Any]]:
    """Sample at ``t0 + i * every_s`` up to ``seconds`` into the run."""
    samples: list[dict[str, Any]] = []
    i = 0
    print_every = max(1, round(30 / every_s))
    while True:
        t = i * every_s
        delay = t0 + t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        try:
            n_all, n_own = topics.count(prefix)
        except Exception as e:  # the broker did not answer this time: a gap, not the end of the run
            console.print(f"[yellow]topics not listed at {t:g} s: {e}[/]")
            n_all = n_own = -1
        sample: dict[str, Any] = {"t_s": round(time.monotonic() - t0, 2), "topics": n_all, "own_topics": n_own,
                                  "roles": {}}
        for role, pid in roles.items():
            s = _sample_role(pid)
            sample["roles"][role] = None if s is None else {"rss_kib": s.rss_kib, "fds": s.fds,
                                                            "processes": s.processes}
        samples.append(sample)
        if i % print_every == 0:
            mem = ", ".join(f"{r} {v['rss_kib'] / 1024:.0f} MiB/{v['fds']} fds" if v else f"{r} gone"
                            for r, v in sample["roles"].items())
            console.print(f"soak {t:5.0f}/{seconds:g} s: {mem}; topics {n_all} (own {n_own})")
        if t >= seconds:
            return samples
        i += 1


def _role_results(samples: list[dict[str, Any]], roles: Iterable[str], warmup_s: float) -> dict[str, Any]:
    out = {}
    for role in roles:
        seen = [(s["t_s"], s["roles"][role]) for s in samples if s["roles"].get(role)]
        rss = [(t, float(v["rss_kib"])) for t, v in seen]
        fds = [(t, float(v["fds"])) for t, v in seen]
        rss0, rss1 = at_warmup_and_end(rss, warmup_s)
        fd0, fd1 = at_warmup_and_end(fds, warmup_s)
        out[role] = {"samples": len(seen), "rss_kib_warm": int(rss0), "rss_kib_end": int(rss1),
                     "rss_kib_max": int(max(v for _, v in rss)), "rss_growth_pct": growth_pct(rss0, rss1),
                     "fds_warm": int(fd0), "fds_end": int(fd1), "fd_growth": int(fd1 - fd0),
                     "alive_at_end": samples[-1]["roles"].get(role) is not None}
    return out


def run(quick: bool, console: Any, *, seconds: float | None = None,
        frames_per_s: float | None = None) -> dict[str, Any]:
    """Run the soak. ``seconds`` (of load) and ``frames_per_s`` override the quick or full run's."""
    from rich.table import Table

    from vidnexus.apps import APP_REFS
    from vidnexus.benchmarks.app_deployment import Until, demo_spec, deploy, feed, frames_done, render, teardown
    from vidnexus.clock import wall_time
    from vidnexus.config import load_settings
    from vidnexus.operators.infer import stage_slos
    from vidnexus.streams.sources import open_source

    settings = load_settings()
    seconds = float(seconds or (QUICK_S if quick else FULL_S))
    load = float(frames_per_s or LOAD_FRACTION * CAPACITY_FRAMES_PER_S)
    every_s = 5.0 if seconds >= 60 else max(1.0, seconds / 12)
    warmup_s = WARMUP_FRACTION * seconds
    cycle_s = min(seconds, 15.0 if quick else 30.0)
    spec, app = demo_spec(APP)
    prepared = spec.prepare(settings)
    slos = stage_slos(app)
    n = streams_for(load, SAMPLE_FPS)
    tag = uuid.uuid4().hex[:6]
    prefix = f"soak{tag}"
    sources = [(f"{tag}-{s.name}", Until(open_source(s.url), s.until_s))
               for s in spec.streams(n, cycle_s, spec.source_fps, SAMPLE_FPS)[:n]]  # synthetic cameras only
    console.print(f"soak: rendering {cycle_s:g} s of {n} cameras at {SAMPLE_FPS:g} frames/s …")
    cycle = render(sources, SAMPLE_FPS, APP)
    topics = BrokerTopics(settings.kafka_bootstrap)
    d = deploy(settings.kafka_bootstrap, settings.clickhouse_url, APP_REFS[APP],
               [f"{m}:{s:g}" for m, s in slos.items()], prefix=prefix)
    published: list[float] = []
    stop = threading.Event()
    where = f"app = '{app.name}' AND stream LIKE '{tag}-%'"
    try:
        roles = {name: r.proc.pid for name, r in d.roles.items()}
        t0_wall, t0 = wall_time(), time.monotonic()
        feeder = feed(d, looped(cycle, cycle_s, seconds), on_publish=lambda _s, _i, now: published.append(now),
                      stop=stop)
        samples = _samples_until(seconds, every_s, t0, roles, topics, prefix, console)
        feeder.join(timeout=30)
        load_s = time.monotonic() - t0
        deadline = time.monotonic() + DRAIN_S
        done = frames_done(d, app.name, where)
        while done < len(published) and time.monotonic() < deadline:
            time.sleep(1.0)
            done = frames_done(d, app.name, where)
        q = d.store.query
        rows = f"FROM vnx_frames FINAL WHERE {where}"
        warm_wall = t0_wall + warmup_s
        sent_after = sum(1 for w in published if w >= warm_wall)
        in_slo_after = int(q(f"SELECT countIf(status = 'ok' AND latency_ms <= {app.slo_ms!r}) {rows} "
                             f"AND ingest_ts >= {warm_wall!r}").scalar() or 0) if done else 0
        status = {str(k): int(v) for k, v in q(f"SELECT status, count() {rows} GROUP BY status").rows} if done else {}
        reasons = [[str(r), int(c)] for r, c in q(f"SELECT reasons, count() {rows} AND status != 'ok' GROUP BY reasons "
                                                 "ORDER BY count() DESC LIMIT 5").rows] if done else []
        per_interval = _interval_attainment(d.store, where, t0_wall, every_s, app.slo_ms) if done else {}
        logs = {name: "".join(r.log[-20:]) for name, r in d.roles.items()}
    finally:
        stop.set()
        teardown(d)
    for i, s in enumerate(samples):  # sample i closes interval i - 1
        finished, ok = per_interval.get(i - 1, (0, 0))
        s["frames_finished"], s["slo_attainment"] = finished, attainment(ok, finished)
    time.sleep(2.0)  # the worker's client deletes its reply topic as it stops
    left = {t for t in topics.names() if t.startswith(prefix + ".")}
    reply_left = sorted(t for t in left if t.startswith(f"{prefix}.replies."))
    delete_topics(settings.kafka_bootstrap, left)  # the run's own topics go with it

    role_results = _role_results(samples, roles, warmup_s)
    own = [s["own_topics"] for s in samples if s["own_topics"] >= 0]
    broker = [s["topics"] for s in samples if s["topics"] >= 0]
    results = {"roles": role_results, "samples": samples, "status": status, "drop_reasons": reasons,
               "reply_topics_left": reply_left, "prepared": prepared,
               "role_logs_tail": {k: v for k, v in logs.items() if not role_results[k]["alive_at_end"]}}
    summary: dict[str, Any] = {
        "rss_growth_pct_max": max(r["rss_growth_pct"] for r in role_results.values()),
        "fd_growth_max": max(r["fd_growth"] for r in role_results.values()),
        "topics_start": broker[0] if broker else None, "topics_end": broker[-1] if broker else None,
        "own_topics_start": own[0] if own else None, "own_topics_end": own[-1] if own else None,
        "reply_topics_left": len(reply_left),
        "slo_attainment": attainment(in_slo_after, sent_after),
        "frames": len(published), "frames_lost": len(published) - done,
        "frames_per_s": round(len(published) / load_s, 1) if load_s > 0 else None,
        "seconds": seconds, "roles_alive_at_end": all(r["alive_at_end"] for r in role_results.values()),
    }
    for role, r in role_results.items():
        summary[f"rss_growth_pct_{role}"] = r["rss_growth_pct"]

    table = Table("role", "samples", "RSS warm MiB", "RSS end MiB", "growth %", "RSS max MiB", "fds warm", "fds end",
                  title=f"soak: {APP} at {load:g} frames/s for {seconds:g} s (warm-up {warmup_s:g} s)")
    for role, r in role_results.items():
        table.add_row(role, str(r["samples"]), f"{r['rss_kib_warm'] / 1024:.0f}", f"{r['rss_kib_end'] / 1024:.0f}",
                      f"{r['rss_growth_pct']:+.1f}", f"{r['rss_kib_max'] / 1024:.0f}", str(r["fds_warm"]),
                      str(r["fds_end"]))
    console.print(table)
    console.print(f"summary: {summary}")
    return {"name": "soak", "machine": machine_info(),
            "config": {"quick": quick, "app": APP, "slo_ms": app.slo_ms, "seconds": seconds,
                       "frames_per_s": load, "capacity_frames_per_s": CAPACITY_FRAMES_PER_S,
                       "capacity_from": "bench/results/apps-kafka-2026-11-23.json", "streams": n,
                       "sample_fps": SAMPLE_FPS, "cycle_s": cycle_s, "sample_every_s": every_s, "warmup_s": warmup_s,
                       "sessions": {m: s for m, s in slos.items()}, "roles": sorted(roles),
                       "broker": settings.kafka_bootstrap, "topic_prefix": prefix},
            "results": results, "summary": summary}
