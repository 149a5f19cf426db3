"""The dance app distributed: four performers of different skill at 5 fps in real time over Kafka,
with the executor, a faust worker and the sink as separate processes, rows in the ClickHouse
server; scores from the keypoints read checked against scores from the true keypoints."""

import uuid

import pytest

from tests.integration.app_harness import deploy, feed, render, teardown, wait_frames
from vidnexus.config import Settings

SKILLS = (0.95, 0.75, 0.5, 0.2)


@pytest.fixture(scope="module")
def trained_models():
    from vidnexus.apps.dance.models import load_or_train

    load_or_train(Settings().data_dir / "models")


@pytest.mark.timeout(900)
def test_dance_app_over_kafka_scores_performances(kafka_bootstrap, clickhouse_url, trained_models):
    from tests.integration.apps.dance_patient import app
    from vidnexus.apps.dance.render import DanceSource
    from vidnexus.operators.infer import stage_slos

    tag = uuid.uuid4().hex[:6]
    slos = stage_slos(app)
    d = deploy(kafka_bootstrap, clickhouse_url, "tests.integration.apps.dance_patient:app",
               [f"dance_pose:{slos['dance_pose']:g}"])
    try:
        perf = [(f"{tag}-d{i}", DanceSource(seed=20 + i, fps=10, skill=s)) for i, s in enumerate(SKILLS)]
        frames = render(perf, 5.0, "dance")
        feed(d, frames).join()
        where = f"stream LIKE '{tag}-%'"
        wait_frames(d, "dance", where, len(frames), 300)
        q = d.store.query
        status = dict(q(f"SELECT status, count() FROM vnx_frames FINAL WHERE app = 'dance' AND {where} "
                        "GROUP BY status").rows)
        assert status == {"ok": len(frames)}, status
        scores = {s: (a, b, e) for s, a, b, e in q(
            f"SELECT stream, 100 * avg(sim), 100 * avg(sim_truth), avg(kp_error_px) FROM dance_frames FINAL "
            f"WHERE {where} GROUP BY stream").rows}
        print(f"dance over Kafka: {len(frames)} frames; (score read, score from truth, keypoint error px): {scores}")
        for sid, _ in perf:
            read, truth, err = scores[sid]
            assert abs(read - truth) <= 10.0, (sid, read, truth)  # measured gap: 2–8.5 points
            assert err <= 6.0, (sid, err)
        ranked = [sid for sid, _ in sorted(perf, key=lambda p: -scores[p[0]][0])]
        assert ranked == [sid for sid, _ in perf], f"scores do not rank the skills: {scores}"
    finally:
        teardown(d)
