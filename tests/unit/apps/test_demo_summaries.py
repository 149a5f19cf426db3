"""The demos' summaries print lines and hand the same figures over as data (``vidnexus demo
--save`` writes them under ``demo.figures``): checked on canned query results, no run needed."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from vidnexus.apps.spec import DemoSummary
from vidnexus.connectors.store import QueryResult
from vidnexus.contracts.profile import Profile


class CannedStore:
    """A store whose every query returns ``rows``."""

    def __init__(self, rows):
        self.rows, self.sql = rows, []

    def query(self, sql):
        self.sql.append(sql)
        return QueryResult(("c",) * len(self.rows[0]) if self.rows else (), (), list(self.rows))


def test_game_icon_step_figures(monkeypatch):
    import vidnexus.apps.game as game

    monkeypatch.setattr(game.specializer, "retrain_seconds", [0.05, 0.1])
    profiles = {"game_icons_g3": Profile((1, 2), (0.005, 0.008)), "glyph_compact": Profile((1,), (0.001,))}
    executor = SimpleNamespace(core=SimpleNamespace(profiles=lambda: profiles))
    # 100 icons: the oracle ran on 40, the compact model on 70 (alone on 60), item accuracy 97.5%
    s = game.icon_cost_summary(CannedStore([(100, 40, 70, 60, 97.5)]), executor)
    assert isinstance(s, DemoSummary) and len(s.lines) == 2
    assert "alone on 60, 60.0%" in s.lines[0] and "2 specializations trained in 150 ms" in s.lines[0]
    assert s.figures == {
        "icons": 100, "oracle_calls": 40, "compact_calls": 70, "compact_only": 60, "compact_only_pct": 60.0,
        "item_pct": 97.5, "specializations": 2, "retrain_ms": 150.0,
        "l1_ms": {"oracle": 5.0, "compact": 1.0}, "l1_models": {"oracle": "game_icons_g3", "compact": "glyph_compact"},
        "icon_work_ms": {"weg": 420.0, "oracle_only": 500.0}, "icon_work_ratio": 1.19,
    }
    assert "420 ms with WEG vs 500 ms oracle-only → [bold]1.19× less[/]" in s.lines[1]


def test_game_without_rows_or_profiles(monkeypatch):
    import vidnexus.apps.game as game

    monkeypatch.setattr(game.specializer, "retrain_seconds", [])
    none = SimpleNamespace(core=SimpleNamespace(profiles=lambda: {}))
    assert game.icon_cost_summary(CannedStore([(0, 0, 0, 0, None)]), none).figures == {"icons": 0}
    s = game.icon_cost_summary(CannedStore([(10, 10, 0, 0, 90.0)]), none)
    assert len(s.lines) == 1 and "l1_ms" not in s.figures and s.figures["compact_only_pct"] == 0.0


@pytest.mark.parametrize("real", [False, True])
def test_traffic_counts_against_the_truth(monkeypatch, real):
    import vidnexus.apps.traffic as traffic

    monkeypatch.setattr(traffic, "_real_video", lambda: Path("/videos/car-detection.mp4") if real else None)
    monkeypatch.setattr(traffic, "_hand_events", lambda video: [(3.0, 9.0, "car"), (12.0, 20.0, "car"),
                                                               (40.0, 45.0, "car")])
    rows = [("cam-1", 7, 7, 59.8), ("cam-2-rush", 20, 21, 59.8), ("parking-lot", 2, -1, 19.8)]
    s = traffic._summary(CannedStore(rows), None)
    assert s.lines[1] == "cam-2-rush: counted 20 vehicles; the generator sent 21 into view"
    lot = ({"stream": "parking-lot", "counted": 2, "truth": 2, "truth_from": "tests/data/hand_counts.json",
            "up_to_s": 19.8} if real else
           {"stream": "parking-lot", "counted": 2, "truth": None, "truth_from": None, "up_to_s": 19.8})
    assert s.figures == {"vehicles": [
        {"stream": "cam-1", "counted": 7, "truth": 7, "truth_from": "generator", "up_to_s": 59.8},
        {"stream": "cam-2-rush", "counted": 20, "truth": 21, "truth_from": "generator", "up_to_s": 59.8},
        lot,
    ]}


def test_dance_scores():
    import vidnexus.apps.dance as dance

    s = dance._summary(CannedStore([("dancer-1-skill95", 89.04, 97.66, 2.714), ("dancer-2-skill70", 82.3, 88.0, 3.1)]),
                       None)
    assert s.lines[0] == ("dancer-1-skill95: score 89.0 from the keypoints read, 97.7 from the true keypoints "
                          "(mean keypoint error 2.7 px)")
    assert s.figures == {"scores": [
        {"stream": "dancer-1-skill95", "score_read": 89.0, "score_truth": 97.7, "kp_error_px": 2.71},
        {"stream": "dancer-2-skill70", "score_read": 82.3, "score_truth": 88.0, "kp_error_px": 3.1},
    ]}
