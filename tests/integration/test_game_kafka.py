"""The game app distributed: 4 streamers (Zipf-drawn games, two on the same game) at 5 fps in real
time over Kafka, with the executor, a faust worker and the sink as separate processes, rows in the
ClickHouse server, checked against the generator's ground truth."""

import uuid

import pytest

from tests.integration.app_harness import deploy, feed, render, teardown, wait_frames
from vidnexus.config import Settings

STREAMS, SECONDS, FPS = 4, 30, 5.0


@pytest.fixture(scope="module")
def trained_models():
    """Train (or load) the digit reader and the glyph models in the data directory the roles share."""
    from vidnexus.apps.game.models import glyph_models
    from vidnexus.training.digits import load_or_train

    load_or_train(Settings().data_dir / "models")
    glyph_models()


@pytest.mark.timeout(900)
def test_game_app_over_kafka_matches_ground_truth(kafka_bootstrap, clickhouse_url, trained_models):
    from vidnexus.apps.game.render import GameSource, zipf_games
    from vidnexus.operators.infer import stage_slos
    from tests.integration.apps.game_patient import app

    tag = uuid.uuid4().hex[:6]
    games = zipf_games(STREAMS, seed=1)
    assert len(set(games)) < STREAMS, "want two streamers on one game (shared sessions)"
    slos = stage_slos(app)
    sessions = [f"hud_digits:{slos['hud_digits']:g}", f"glyph_compact:{slos['glyph_compact']:g}"]
    sessions += [f"game_icons_g{g}:{slos[f'game_icons_g{g}']:g}" for g in sorted(set(games))]
    d = deploy(kafka_bootstrap, clickhouse_url, "tests.integration.apps.game_patient:app", sessions)
    try:
        exec_log = "".join(d.roles["executor"].log)
        assert "prefix batching" in exec_log and "share one trunk" in exec_log, exec_log[-3000:]
        sources = [(f"{tag}-s{i}", GameSource(g, seed=i + 1, fps=10, seconds=SECONDS)) for i, g in enumerate(games)]
        frames = render(sources, FPS, "game")
        feeder = feed(d, frames)
        feeder.join()
        where = f"stream LIKE '{tag}-%'"
        wait_frames(d, "game", where, len(frames), 300)
        q = d.store.query
        status = dict(q(f"SELECT status, count() FROM vnx_frames FINAL WHERE app = 'game' AND {where} "
                        "GROUP BY status").rows)
        assert sum(status.values()) == len(frames)  # every sampled frame accounted once
        ok = status.get("ok", 0)
        rows = q(f"SELECT count() FROM game_reads FINAL WHERE {where}").scalar()
        assert rows == ok
        assert ok == len(frames), f"drops under a 30 s SLO: {status}"
        counters, item = q(
            "SELECT avg(score_read = score_truth AND kills_read = kills_truth AND alive_read = alive_truth), "
            f"avg(item_read = item_truth) FROM game_reads FINAL WHERE {where}").rows[0]
        assert counters >= 0.97, counters
        assert item >= 0.90, item
        # Each streamer's rows carry its game (read from the frame tags, used to pick the icon head).
        per_stream = dict(q(f"SELECT stream, groupUniqArray(game) FROM game_reads FINAL WHERE {where} "
                            "GROUP BY stream").rows)
        assert per_stream == {sid: [g] for (sid, _), g in zip(sources, games)}
        paths = dict(q(f"SELECT icon_path, count() FROM game_reads FINAL WHERE {where} GROUP BY icon_path").rows)
        lat = q(f"SELECT quantiles(0.5, 0.99)(latency_ms) FROM game_reads FINAL WHERE {where}").scalar()
        print(f"game over Kafka: {len(frames)} frames, status {status}, counters exact {100 * counters:.2f}%, "
              f"items {100 * item:.2f}%, icon paths {paths}, latency p50/p99 {lat[0]:.0f}/{lat[1]:.0f} ms")
        assert paths.get("compact", 0) > 0, f"WEG never specialized: {paths}"
    finally:
        teardown(d)
