"""`vidnexus bench apps`: the baseline read from the 2026-11-22 app_slo runs and the capacity search."""

import json

from vidnexus.benchmarks.apps_bench import _search, baseline


def test_the_baseline_is_the_largest_rate_at_95_percent_or_else_at_90():
    b = baseline()
    assert (b["traffic"]["streams"], b["traffic"]["fps"]) == (9, 45.0)
    assert (b["dance"]["streams"], b["dance"]["fps"]) == (6, 30.0)
    assert (b["game"]["streams"], b["game"]["fps"]) == (3, 15.0) and ">= 90" in b["game"]["rule"]


def test_a_run_without_any_passing_trial_gives_a_zero_baseline(tmp_path):
    p = tmp_path / "b.json"
    p.write_text(json.dumps({"runs": [{"app": "x", "fps": 5, "results": [{"streams": 2, "ok_within_slo_pct": 50}]}]}))
    assert baseline(p)["x"]["fps"] == 0.0


def test_the_search_grows_then_bisects_to_the_largest_passing_count():
    tried = []

    def trial(n):
        tried.append(n)
        return {"passed": n <= 17}

    n, done = _search(trial, 9, 10)
    assert n == 17 and len(done) == len(tried) and tried[:3] == [9, 14, 21]
    assert _search(lambda n: {"passed": False}, 4, 10)[0] == 0
    assert len(_search(lambda n: {"passed": True}, 1, 3)[1]) == 3  # at most max_trials
