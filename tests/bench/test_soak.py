"""``vidnexus bench soak``: its measurements (pure, no services) and a short run on the real broker
and ClickHouse server that checks the JSON's shape and invariants, not what it measures (a full
run's figures live in bench/results/ and docs/benchmarks.md)."""

import math

import pytest

from vidnexus.benchmarks import soak
from vidnexus.errors import VidnexusError

SOAK_SUMMARY = {"rss_growth_pct_max", "fd_growth_max", "topics_start", "topics_end", "own_topics_start",
                "own_topics_end", "reply_topics_left", "slo_attainment", "frames", "frames_lost"}


@pytest.mark.parametrize("status, kib", [
    ("Name:\tpython\nVmPeak:\t  900 kB\nVmRSS:\t  123456 kB\nThreads:\t4\n", 123456),
    ("Name:\tzombie\nState:\tZ (zombie)\n", 0),
])
def test_rss_kib_reads_vmrss(status, kib):
    assert soak.rss_kib(status) == kib


@pytest.mark.parametrize("start, end, pct", [(200, 210, 5.0), (200, 190, -5.0), (100, 100, 0.0), (0, 50, 0.0)])
def test_growth_pct(start, end, pct):
    assert soak.growth_pct(start, end) == pct


def test_growth_is_taken_from_the_first_sample_after_warm_up_to_the_last():
    series = [(0.0, 50.0), (4.9, 80.0), (5.1, 100.0), (10.0, 104.0), (15.0, 110.0)]
    assert soak.at_warmup_and_end(series, warmup_s=5.0) == (100.0, 110.0)
    with pytest.raises(VidnexusError, match="warm-up"):
        soak.at_warmup_and_end(series, warmup_s=20.0)


def test_looped_frames_keep_times_and_frame_numbers_rising_per_stream():
    cycle = [(0.0, "a", (0, (4, 4, 3), b"A0"), {"k": "v"}), (0.0, "b", (0, (4, 4, 3), b"B0"), {}),
             (0.4, "a", (4, (4, 4, 3), b"A4"), {}), (0.8, "b", (8, (4, 4, 3), b"B8"), {})]
    out = list(soak.looped(cycle, period_s=1.0, seconds=2.5))
    assert [round(f[0], 2) for f in out] == [0.0, 0.0, 0.4, 0.8, 1.0, 1.0, 1.4, 1.8, 2.0, 2.0, 2.4]
    for sid in "ab":
        numbers = [f[2][0] for f in out if f[1] == sid]
        assert numbers == sorted(set(numbers))  # rising, no repeats
    assert out[4][2] == (9, (4, 4, 3), b"A0") and out[4][3] == {"k": "v"}
    assert list(soak.looped([], 1.0, 10.0)) == []


@pytest.mark.parametrize("fps, sample_fps, streams", [(164.0, 5.0, 33), (205.0, 5.0, 41), (1.0, 5.0, 1)])
def test_streams_for(fps, sample_fps, streams):
    assert soak.streams_for(fps, sample_fps) == streams


def test_attainment():
    assert soak.attainment(99, 100) == 0.99 and soak.attainment(0, 0) is None


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_a_short_soak_loses_nothing_and_leaves_no_topic_behind():
    from rich.console import Console

    doc = soak.run(quick=True, console=Console(quiet=True), seconds=30.0, frames_per_s=40.0)
    assert {"name", "machine", "config", "results", "summary"} <= set(doc) and doc["name"] == "soak"
    s = doc["summary"]
    assert SOAK_SUMMARY <= set(s)
    assert s["frames"] > 0 and s["frames_lost"] == 0, s
    assert 0.0 <= s["slo_attainment"] <= 1.0
    assert all(math.isfinite(s[k]) for k in ("rss_growth_pct_max", "fd_growth_max"))
    roles = doc["results"]["roles"]
    assert set(roles) == {"executor", "worker", "sink"} and all(r["alive_at_end"] for r in roles.values())
    samples = doc["results"]["samples"]
    assert len(samples) >= 5
    for sample in samples:
        assert all(sample["roles"][r]["rss_kib"] > 0 and sample["roles"][r]["fds"] > 0 for r in roles)
    assert sum(x["frames_finished"] for x in samples) > 0
    # The run's own topics do not grow (clients come and go without leaving reply topics), and the
    # worker's reply topic went when it stopped.
    assert s["own_topics_end"] - s["own_topics_start"] <= 2, s
    assert s["reply_topics_left"] == 0, doc["results"]["reply_topics_left"]
