"""Measure a built-in app's SLO attainment over Kafka at the app's own SLO, for growing stream counts.

Same deployment as the app integration tests (vidnexus/benchmarks/app_deployment.py: one executor, one
worker and one sink process, frames published at their real pace, rows in the ClickHouse
server), but with the app as shipped (its own SLO, split evenly over its DNN stages) and the
streams of its demo. Needs the broker and the server running (`vidnexus services up`, with
VNX_KAFKA_BOOTSTRAP and VNX_CLICKHOUSE_URL set):

    python -m tests.integration.tools.app_slo game --streams 1 2 3 --seconds 30 --json out.json

Prints, per stream count, the frames' outcomes and the end-to-end latency (ingest to outcome) of
the frames answered in full, with the machine and the command. `vidnexus bench apps`
(vidnexus/benchmarks/apps_bench.py) is its successor as a benchmark: the same trials for every app,
over Kafka and embedded, with a search for each one's capacity.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from typing import Any


def measure(app_name: str, n: int, seconds: float, fps: float, bootstrap: str, url: str) -> dict[str, Any]:
    from vidnexus.apps import APP_REFS
    from vidnexus.benchmarks.app_deployment import Until, demo_spec, deploy, feed, render, teardown, wait_frames
    from vidnexus.operators.infer import stage_slos
    from vidnexus.streams.sources import open_source

    spec, app = demo_spec(app_name)
    slos = stage_slos(app)
    tag = uuid.uuid4().hex[:6]
    sources = [(f"{tag}-{s.name}", Until(open_source(s.url), s.until_s))
               for s in spec.streams(n, seconds, spec.source_fps, fps)]
    frames = render(sources, fps, app_name)
    d = deploy(bootstrap, url, APP_REFS[app_name], [f"{m}:{s:g}" for m, s in slos.items()])
    try:
        t0 = time.monotonic()
        feed(d, frames).join()
        where = f"stream LIKE '{tag}-%'"
        wait_frames(d, app.name, where, len(frames), 600)
        rows = f"FROM vnx_frames FINAL WHERE app = '{app.name}' AND {where}"
        q = d.store.query
        status = dict(q(f"SELECT status, count() {rows} GROUP BY status").rows)
        p50, p99, in_slo = q(f"SELECT quantileIf(0.5)(latency_ms, status = 'ok'), quantileIf(0.99)(latency_ms, "
                             f"status = 'ok'), countIf(status = 'ok' AND latency_ms <= {app.slo_ms}) {rows}").rows[0]
        reasons = q(f"SELECT reasons, count() {rows} AND status != 'ok' GROUP BY reasons ORDER BY count() DESC "
                    "LIMIT 5").rows
        return {"streams": len(sources), "frames": len(frames), "status": status,
                "ok_pct": round(100 * status.get("ok", 0) / len(frames), 1),
                "ok_within_slo_pct": round(100 * in_slo / len(frames), 1),
                "p50_ms": round(float(p50 or 0), 1), "p99_ms": round(float(p99 or 0), 1),
                "drop_reasons": [list(r) for r in reasons], "wall_s": round(time.monotonic() - t0, 1)}
    finally:
        teardown(d)


def main(argv: list[str] | None = None) -> int:
    from vidnexus.benchmarks.app_deployment import demo_spec
    from vidnexus.benchmarks.machine import machine_info
    from vidnexus.config import load_settings

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("app", choices=["hud", "game", "traffic", "dance"])
    p.add_argument("--streams", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--fps", type=float, default=5.0, help="sampled frames per second per stream")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    s = load_settings()
    slo = demo_spec(a.app)[1].slo_ms
    results = []
    for n in a.streams:
        r = measure(a.app, n, a.seconds, a.fps, s.kafka_bootstrap, s.clickhouse_url)
        results.append(r)
        print(f"{a.app} at its {slo:g} ms SLO over Kafka: {r['streams']} streams, {r['frames']} frames: "
              f"ok {r['ok_pct']}% (within the SLO {r['ok_within_slo_pct']}%), p50 {r['p50_ms']} ms, "
              f"p99 {r['p99_ms']} ms; {r['status']} {r['drop_reasons']}", flush=True)
    out = {"command": " ".join(["python -m tests.integration.tools.app_slo", *(argv or sys.argv[1:])]),
           "machine": machine_info(), "app": a.app, "slo_ms": slo, "fps": a.fps, "seconds": a.seconds,
           "results": results}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
