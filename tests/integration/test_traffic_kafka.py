"""The traffic app distributed: four synthetic cameras (two in rush hour) and the real parking-lot
video, at 5 fps in real time over Kafka, with the executor, a faust worker and the sink as separate
processes, rows in the ClickHouse server; counts checked against the generator's truth and the
hand count."""

import json
import uuid
from pathlib import Path

import pytest

from tests.integration.app_harness import deploy, feed, render, teardown, wait_frames
from vidnexus.config import Settings

ROOT = Path(__file__).resolve().parents[1]
VIDEO = ROOT.parents[1] / "shared" / "data" / "real" / "car-detection.mp4"
HAND = json.loads((ROOT / "data" / "hand_counts.json").read_text())["car-detection.mp4"]
SECONDS, FPS = 40, 5.0


class _File:
    def __init__(self, path):
        self.path = path

    def frames(self):
        from vidnexus.streams.sources import AvSource

        return AvSource(f"file://{self.path}").frames()


@pytest.fixture(scope="module")
def trained_models():
    from vidnexus.apps.traffic.models import load_or_train

    load_or_train(Settings().data_dir / "models")


@pytest.mark.timeout(900)
def test_traffic_app_over_kafka_counts_vehicles(kafka_bootstrap, clickhouse_url, trained_models):
    from tests.integration.apps.traffic_patient import app
    from vidnexus.apps.traffic.render import TrafficSource, parse_cars
    from vidnexus.operators.infer import stage_slos

    assert VIDEO.exists(), f"the shared real video is missing: {VIDEO}"
    tag = uuid.uuid4().hex[:6]
    cams = [(f"{tag}-cam{i}", TrafficSource(seed=10 + i, fps=10, seconds=SECONDS, rush=bool(i % 2))) for i in range(4)]
    truth = {}
    for sid, src in cams:  # cars in view at least 2.5 s before the end can be counted
        first = {}
        for raw in src.frames():
            for c in parse_cars(raw.truth["cars"]):
                first.setdefault(c[0], raw.pts)
        truth[sid] = sum(1 for t in first.values() if t <= SECONDS - 2.5)
    slos = stage_slos(app)
    d = deploy(kafka_bootstrap, clickhouse_url, "tests.integration.apps.traffic_patient:app",
               [f"car_colours:{slos['car_colours']:g}"])
    try:
        frames = render(cams + [(f"{tag}-lot", _File(VIDEO))], FPS, "traffic")
        feed(d, frames).join()
        where = f"stream LIKE '{tag}-%'"
        wait_frames(d, "traffic", where, len(frames), 300)
        q = d.store.query
        status = dict(q(f"SELECT status, count() FROM vnx_frames FINAL WHERE app = 'traffic' AND {where} "
                        "GROUP BY status").rows)
        assert status == {"ok": len(frames)}, status
        counted = dict(q(f"SELECT stream, uniqExactIf(track_id, counts = 1) FROM traffic_objects FINAL "
                         f"WHERE {where} GROUP BY stream").rows)
        colour_ok = q(f"SELECT avg(colour = truth_colour) FROM traffic_objects FINAL WHERE {where} "
                      "AND truth_car >= 0 AND counts = 1").scalar()
        synth = sum(counted.get(sid, 0) for sid, _ in cams)
        want = sum(truth.values())
        print(f"traffic over Kafka: {len(frames)} frames; counted {counted}; truth {truth} (+ hand count "
              f"{HAND['vehicles']} for the lot); colour reads {100 * colour_ok:.1f}%")
        assert abs(synth - want) <= 0.2 * want, (counted, truth)
        assert abs(counted.get(f"{tag}-lot", 0) - HAND["vehicles"]) <= 0.2 * HAND["vehicles"]
        assert colour_ok >= 0.8
        # The real cars' colours against the hand labels: each labelled car is the counted track of
        # the lot that overlaps its time in view most; its commonest colour read must be the label's
        # for at least 3 of the 4 cars.
        tracks = q(f"SELECT min(pts), max(pts), topK(1)(colour)[1] FROM traffic_objects FINAL "
                   f"WHERE stream = '{tag}-lot' AND counts = 1 GROUP BY track_id").rows
        reads = []
        for car in HAND["colours"]["cars"]:
            best = max(tracks, key=lambda t: min(float(t[1]), car["to"]) - max(float(t[0]), car["from"]), default=None)
            reads.append((car["car"], car["colour"], best[2] if best else None))
        print(f"real cars' colours (label, read): {reads}")
        assert sum(want == got for _, want, got in reads) >= 3, reads
    finally:
        teardown(d)
