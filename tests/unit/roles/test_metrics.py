"""Every role's /metrics (issue 22 item 3): each role's collectors are served on a real HTTP port,
scraped, and must carry every metric docs/metrics.md documents for that role, with its labels and
the values the role's counters hold."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest

from vidnexus.contracts.plans import EpochPlan
from vidnexus.gpu_executor.metrics import ExecutorMetrics
from vidnexus.operators.engine import FrameOutcome
from vidnexus.roles.metrics import IngestCollector, SchedulerMetrics, SinkCollector, WorkerCollector, serve
from vidnexus.roles.sink import SinkStats
from vidnexus.roles.worker import WorkerStats
from vidnexus.streams.ingest import StreamStatus

DOC = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"


def documented() -> dict[str, list[tuple[str, str, list[str]]]]:
    """role → (metric, type, labels) from the page's table."""
    out: dict[str, list[tuple[str, str, list[str]]]] = {}
    for line in DOC.read_text().splitlines():
        m = re.match(r"\|\s*(\w[\w-]*)\s*\|\s*`(vnx_\w+)`\s*\|\s*(\w+)\s*\|\s*([^|]*)\|", line)
        if m:
            labels = [x.strip() for x in m.group(4).split(",") if x.strip()]
            out.setdefault(m.group(1), []).append((m.group(2), m.group(3), labels))
    return out


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def _served(role: str) -> str:
    if role == "ingest":
        st = StreamStatus("cam-1", state="running", decoded=30, sampled=10, published=9, stale=1, errors=2,
                          reconnects=1, last_publish=5.0)
        _, port = serve(0, "127.0.0.1", IngestCollector(lambda: [st], lambda: 7.5))
        text = scrape(port)
        assert 'vnx_ingest_frames_total{stage="published",stream="cam-1"} 9.0' in text
        assert 'vnx_ingest_seconds_since_frame{stream="cam-1"} 2.5' in text
        return text
    if role == "worker":
        st = WorkerStats()
        for status in ("ok", "ok", "dropped"):
            st.add(FrameOutcome("cam-1", 1, status=status, rows={"t": [(1,)]} if status == "ok" else {}))
        st.dead = 1
        _, port = serve(0, "127.0.0.1", WorkerCollector("cars", lambda: st, lambda: 3))
        text = scrape(port)
        assert 'vnx_worker_frames_total{app="cars",status="ok"} 2.0' in text
        assert 'vnx_worker_frames_in_flight{app="cars"} 3.0' in text
        return text
    if role == "sink":
        _, port = serve(0, "127.0.0.1", SinkCollector(lambda: SinkStats(messages=4, rows=40, inserts=2, retries=1)))
        text = scrape(port)
        assert "vnx_sink_rows_total 40.0" in text
        return text
    if role == "executor":
        registry, port = serve(0, "127.0.0.1")
        m = ExecutorMetrics(registry)
        m.arrival("m-100ms", 0.0)
        m.arrival("m-100ms", 0.1)
        m.batch("m-100ms", 2, 0.02)
        m.reply("m-100ms", 0.03, 0.01, within_slo=True)
        m.drop("m-100ms", "early_drop")
        text = scrape(port)
        assert 'vnx_replies_within_slo_total{session="m-100ms"} 1.0' in text
        return text
    if role == "scheduler":
        registry, port = serve(0, "127.0.0.1")
        SchedulerMetrics(registry).planned(EpochPlan(1, 1, 0.0, devices=2, moved=3, executors=("a", "b")), wanted=5)
        text = scrape(port)
        assert "vnx_scheduler_devices_wanted 5.0" in text and "vnx_scheduler_sessions_moved_total 3.0" in text
        return text
    raise AssertionError(role)


def test_the_page_documents_every_role():
    assert set(documented()) == {"ingest", "worker", "executor", "sink", "scheduler"}


@pytest.mark.parametrize("role", sorted(documented()))
def test_each_role_serves_what_the_page_documents(role):
    text = _served(role)
    for name, kind, labels in documented()[role]:
        types = {f"# TYPE {name} {kind}", f"# TYPE {name.removesuffix('_total')} {kind}"}
        assert any(t in text for t in types), f"{role}: {name} ({kind}) is not served:\n{text}"
        sample = name if kind != "histogram" else f"{name}_count"
        lines = [ln for ln in text.splitlines() if ln.startswith(sample + "{") or ln.startswith(sample + " ")]
        assert lines, f"{role}: no sample of {sample}"
        for label in labels:
            assert any(f'{label}="' in ln for ln in lines), f"{role}: {name} has no label {label}: {lines}"
