"""The hudtext app distributed: PP-OCRv4's recogniser (ONNX, real weights from a package) in the
executor process, a faust worker and the sink as separate processes over Kafka, two streams of HUD
text drawn over the real videos in a font vidnexus never trained on, rows in the ClickHouse server,
checked against the values drawn."""

import uuid

import pytest

from tests.integration.app_harness import deploy, feed, render, teardown, wait_frames

STREAMS, SECONDS, FPS = 2, 20, 5.0


@pytest.mark.timeout(600)
def test_hudtext_app_over_kafka_reads_the_values_drawn(kafka_bootstrap, clickhouse_url):
    from vidnexus.apps.hudtext.render import HudTextSource
    from vidnexus.operators.infer import stage_slos
    from tests.integration.apps.hudtext_patient import app

    tag = uuid.uuid4().hex[:6]
    slos = stage_slos(app)
    d = deploy(kafka_bootstrap, clickhouse_url, "tests.integration.apps.hudtext_patient:app",
               [f"hud_text:{slos['hud_text']:g}"])
    try:
        sources = [(f"{tag}-{video}", HudTextSource(seed=5 + i, fps=10, seconds=SECONDS, video=video))
                   for i, video in enumerate(("car", "people"))]
        frames = render(sources, FPS, "hudtext")
        feed(d, frames).join()
        where = f"stream LIKE '{tag}-%'"
        wait_frames(d, "hudtext", where, len(frames), 300)
        q = d.store.query
        status = dict(q(f"SELECT status, count() FROM vnx_frames FINAL WHERE app = 'hudtext' AND {where} "
                        "GROUP BY status").rows)
        assert sum(status.values()) == len(frames) == STREAMS * SECONDS * FPS  # every sampled frame once
        assert status.get("ok", 0) == len(frames), f"drops under a 30 s SLO: {status}"
        rows, exact, untold = q("SELECT count(), sum(score_read = score_truth) + sum(kills_read = kills_truth), "
                                f"countIf(score_truth < 0) FROM hud_text_reads FINAL WHERE {where}").rows[0]
        assert rows == len(frames) and untold == 0
        print(f"hudtext over Kafka: {len(frames)} frames, {exact} of {2 * rows} HUD values exact")
        assert exact >= 0.95 * 2 * rows, (exact, rows)
    finally:
        teardown(d)
