"""The saved record of an embedded run (``--save``): the document's shape from hand-built data, and
that it is plain JSON (no NaN, no Python-only types)."""

import json

import pytest

from vidnexus.config import Settings
from vidnexus.contracts.plans import EpochPlan, LatencySplit
from vidnexus.contracts.profile import Profile
from vidnexus.roles.embedded import RunResult, StreamFrames
from vidnexus.roles.run_record import SCHEMA, DemoOutput, QueryRows, run_record
from vidnexus.streams.ingest import StreamStatus
from vidnexus.streams.spec import StreamSpec

TOP = {"schema", "kind", "command", "started_utc", "duration_s", "machine", "settings", "result"}
RESULT = {"elapsed_s", "published", "processed", "accounted", "all_accounted", "status", "reasons", "per_stream",
          "ingest", "executor", "models", "stage_slos_ms", "plans", "tables", "report"}


def make_result(**over) -> RunResult:
    plan = EpochPlan(generation=7, epoch=3, ts=0.0, assignments={"embedded": {"reader-50ms": 4}}, devices=1,
                     infeasible=(("x-10ms", "no batch size fits"),),
                     splits={"cams": LatencySplit(True, budgets_ms={"reader": 50.0, "colour": 50.0},
                                                  gamma={"reader→colour": 1.5}, gain=1.2)})
    fields = dict(
        app="cams",
        streams=[StreamStatus("cam-2", state="done", published=3, started=123.4, last_publish=125.0),
                 StreamStatus("cam-1", state="done", published=4)],
        published=7, processed=7, status={"ok": 6, "dropped": 1},
        executor_stats=[{"session": "reader-50ms", "arrivals": 7, "mean_batch": 1.5,
                         "latency_p50_ms": 2.0, "latency_p99_ms": float("nan"), "drops": {"deadline": 1}}],
        plans=[plan], stage_slos_ms={"reader": 50.0, "colour": 50.0},
        specs=[StreamSpec("cam-1", "synthetic://hud?seed=1", fps=5.0), StreamSpec("cam-2", "clip.mp4", every_n=3,
                                                                                  until_s=10.0, check=False)],
        slo_ms=100.0,
        per_stream=[StreamFrames("cam-1", {"ok": 4}, 4, 10.0, 30.5),
                    StreamFrames("cam-2", {"ok": 2, "dropped": 1}, 1, 12.0, None)],
        reasons={"deadline": 1},
        profiles={"reader": Profile((1, 2, 4), (0.002, 0.003, 0.005))},
        elapsed_s=4.25,
    )
    fields.update(over)
    return RunResult(**fields)


def record(result=None, **over):
    kw = dict(command="vidnexus run cams --stream 'a b.mp4'", started_wall=1_800_000_000.5, duration_s=9.0,
              machine={"cpu": "Xeon", "cores": 2, "memory_gib": 23.5, "python": "3.11.7", "platform": "Linux",
                       "command": "from sys.argv"},
              git={"commit": "ab" * 20, "dirty": False}, settings=Settings(bus="memory", store="chdb"),
              options={"stream": ["a b.mp4"], "fps": 5.0, "until": None}, report=["sampled frames: 7"],
              tables={"reads": 6})
    kw.update(over)
    return run_record(result or make_result(), **kw)


def test_the_document_has_every_part_and_is_plain_json():
    doc = record()
    assert set(doc) == TOP | {"git"} and set(doc["result"]) == RESULT
    assert doc["schema"] == SCHEMA and doc["kind"] == "run"
    assert doc["command"] == "vidnexus run cams --stream 'a b.mp4'"
    assert doc["started_utc"] == "2027-01-15T08:00:00Z" and doc["duration_s"] == 9.0
    assert doc["git"] == {"commit": "ab" * 20, "dirty": False}
    assert doc["machine"] == {"cpu": "Xeon", "cores": 2, "memory_gib": 23.5, "python": "3.11.7", "platform": "Linux"}
    assert json.loads(json.dumps(doc, allow_nan=False)) == doc  # strict JSON: NaN became null


def test_settings_name_the_app_its_slo_and_every_stream_with_its_sampling():
    s = record()["settings"]
    assert (s["app"], s["slo_ms"], s["bus"], s["store"]) == ("cams", 100.0, "memory", "chdb")
    assert s["app_switches"] == {"game_specialize": True, "traffic_detector": None, "dance_keypoints": None,
                                     "dance_pose": "regressor"}
    assert s["options"] == {"stream": ["a b.mp4"], "fps": 5.0, "until": None}
    assert s["streams"] == [
        {"name": "cam-1", "url": "synthetic://hud?seed=1", "fps": 5.0, "every_n": None, "keyframes_only": False,
         "realtime": False, "speed": 1.0, "until_s": None, "backfill": False},
        {"name": "cam-2", "url": "clip.mp4", "fps": None, "every_n": 3, "keyframes_only": False,
         "realtime": False, "speed": 1.0, "until_s": 10.0, "backfill": False},
    ]


def test_the_result_accounts_every_frame_per_stream_and_keeps_the_plans():
    r = record()["result"]
    assert (r["published"], r["processed"], r["accounted"], r["all_accounted"]) == (7, 7, 7, True)
    assert r["status"] == {"dropped": 1, "ok": 6} and sum(r["status"].values()) == r["accounted"]
    assert r["reasons"] == {"deadline": 1}
    assert r["per_stream"] == [
        {"stream": "cam-1", "frames": 4, "status": {"ok": 4}, "ok_within_slo": 4, "ok_p50_ms": 10.0, "ok_p99_ms": 30.5},
        {"stream": "cam-2", "frames": 3, "status": {"dropped": 1, "ok": 2}, "ok_within_slo": 1, "ok_p50_ms": 12.0,
         "ok_p99_ms": None},
    ]
    assert [s["name"] for s in r["ingest"]] == ["cam-1", "cam-2"]
    assert "started" not in r["ingest"][1] and "last_publish" not in r["ingest"][1]  # process-local clock
    assert r["ingest"][1]["published"] == 3
    assert r["executor"][0]["latency_p99_ms"] is None and r["executor"][0]["drops"] == {"deadline": 1}
    assert r["models"] == {"reader": {"l1_ms": 2.0, "alpha_ms": 1.0, "beta_ms": 1.0, "max_batch": 4,
                                      "latency_ms": {"1": 2.0, "2": 3.0, "4": 5.0}}}
    assert r["stage_slos_ms"] == {"reader": 50.0, "colour": 50.0}
    (plan,) = r["plans"]
    assert (plan["generation"], plan["epoch"], plan["devices"]) == (7, 3, 1)
    assert plan["assignments"] == {"embedded": {"reader-50ms": 4}}
    assert plan["infeasible"] == [["x-10ms", "no batch size fits"]]
    assert plan["split"]["budgets_ms"] == {"reader": 50.0, "colour": 50.0} and plan["split"]["gain"] == 1.2
    assert r["tables"] == {"reads": 6} and r["report"] == ["sampled frames: 7"] and r["elapsed_s"] == 4.25


def test_a_run_that_lost_frames_says_so():
    r = record(make_result(published=9))["result"]
    assert r["accounted"] == 7 and not r["all_accounted"]


def test_without_a_checkout_there_is_no_git_key():
    assert "git" not in record(git=None)


def test_a_demo_adds_its_queries_summary_and_figures():
    out = DemoOutput("cams", prepare={"reader": "trained in 3 s"}, prepare_s=3.14159,
                     queries=(QueryRows("per stream", "\nSELECT stream, p99 FROM t\n", ("stream", "p99"),
                                        (("cam-1", 30.5), ("cam-2", float("inf")))),),
                     summary=("cam-1: counted 3 vehicles",),
                     figures={"vehicles": [{"stream": "cam-1", "counted": 3, "truth": 3}], "ratio": float("nan")})
    doc = record(demo=out)
    assert doc["kind"] == "demo"
    assert doc["demo"] == {
        "name": "cams", "prepare": {"reader": "trained in 3 s"}, "prepare_s": 3.14,
        "queries": [{"title": "per stream", "sql": "SELECT stream, p99 FROM t", "columns": ["stream", "p99"],
                     "rows": [["cam-1", 30.5], ["cam-2", None]]}],
        "summary": ["cam-1: counted 3 vehicles"],
        "figures": {"vehicles": [{"stream": "cam-1", "counted": 3, "truth": 3}], "ratio": None},
    }
    json.dumps(doc, allow_nan=False)


@pytest.mark.parametrize("value, plain", [
    ((1, 2), [1, 2]), ({3: "x"}, {"3": "x"}), (float("-inf"), None), (True, True), (object, str(object)),
])
def test_values_become_json(value, plain):
    doc = record(options={"v": value})
    assert doc["settings"]["options"]["v"] == plain
