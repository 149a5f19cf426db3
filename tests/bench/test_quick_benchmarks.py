"""Every benchmark runs end to end with --quick and writes the documented JSON shape.

These check that the benchmarks work, not what they measure (figures live in docs/benchmarks.md)."""

import json
import math
import subprocess
import sys

import pytest

from vidnexus.benchmarks import BENCHMARKS

SUMMARY_KEYS = {
    "drop-policies": {"early_over_lazy_poisson_min", "early_over_lazy_poisson_max", "rescue_over_early_poisson_min",
                      "rescue_over_early_bus_min", "real_rescue_over_early", "cpu_poisson_rescue_over_early",
                      "cpu_bus_rescue_over_early", "cpu_bus_over_poisson_early_rescue"},
    "prefix": {"goodput_ratio_k8", "memory_ratio_k8"},
    "multiplex": {"duty_cycle_over_threads_min", "duty_cycle_over_threads_max"},
    "scheduler": {"mean_devices_over_lower_bound", "mean_devices_over_optimal_small", "oblivious_over_squishy",
                  "plan_ms_1000_sessions", "plan_ms_10000_sessions", "mean_optimal_small_over_lower_bound",
                  "devices_over_lower_bound_10000_sessions", "replan_ms_10000_sessions",
                  "replan_moved_fraction_10000_sessions", "single_type_cost_over_mix", "mean_devices_over_split_bound",
                  "mean_devices_over_best_bound", "mean_optimal_small_over_best_bound",
                  "gpu_cpu_single_type_cost_over_mix",
                  "mean_optimal_small_over_split_bound", "devices_over_split_bound_10000_sessions"},
    "latency-split": {"min_gain", "max_gain"},
    "cluster": {"miss_rate", "miss_rate_over_nexus", "devices_over_lower_bound", "devices_over_fresh_plan",
                "moves_per_epoch", "moved_fraction_per_epoch", "plan_ms_mean", "step_reaction_s", "step_miss_rate"},
    "ingest": {"decode_all_vs_ffmpeg", "decode_all_vs_ffmpeg_jpeg", "sample_1fps_speedup_over_decode_all"},
    "runtimes": {"local_msgs_per_s", "faust_msgs_per_s", "local_over_faust", "faust_overhead_us_per_msg"},
    "weg": {"speedup_5_0.9", "acc_delta_5_0.9", "speedup_random", "acc_delta_random"},
    "peers": {"vnx_over_best_peer_tightest_slo", "vnx_over_triton", "vnx_over_ray", "vnx_kafka_over_best_peer_min",
              "vnx_kafka_over_inproc_min"},
    "peers-real": {f"{m}_{k}" for m in ("hud_text", "pose_landmarks")
                   for k in ("vnx_over_best_peer_tightest_slo", "vnx_over_triton", "vnx_over_ray",
                             "vnx_kafka_over_best_peer_min", "vnx_kafka_over_inproc_min")},
    "broker-jvm": set(),  # its summary's keys are named by the option sets run (checked below)
    "hop": {"p50_ms_1000rps_20kb", "p99_ms_1000rps_20kb", "p50_ms_100rps_20kb", "p99_ms_100rps_20kb"},
    "sink": {"server_rows_per_s", "chdb_rows_per_s", "server_store_rows_per_s", "chdb_store_rows_per_s"},
    "preprocess": {"frame_overlap_gain", "crop_overlap_gain", "overlap_gain_min", "frame_wire_over_float32",
                   "crop_wire_over_float32", "frame_overlapped_over_device_only", "crop_overlapped_over_device_only",
                   "frame_overlap_gain_caller", "crop_overlap_gain_caller", "frame_overlap_gain_auto",
                   "crop_overlap_gain_auto"},
    "apps": {"traffic_baseline_fps", "dance_baseline_fps", "game_baseline_fps", "frames_sent", "frames_accounted"},
    "apps-real": {"hudtext_kafka_fps", "hudtext_embedded_fps", "hudtext_kafka_over_embedded", "people_kafka_fps",
                  "people_embedded_fps", "people_kafka_over_embedded", "frames_sent", "frames_accounted"},
    "colocate": {"colocate_rt_attainment", "colocate_rt_attainment_dedicated", "colocate_rt_attainment_unsized",
                 "colocate_background_share", "colocate_background_share_unsized", "sim_colocate_rt_attainment",
                 "sim_colocate_rt_attainment_unsized", "sim_colocate_background_share_half_load"},
    "layerwise": {"layerwise_capacity_over_model_level", "layerwise_capacity_over_none",
                  "layerwise_tardy_capacity_over_model_level", "layerwise_completion_over_model_level",
                  "synthetic_layerwise_capacity_over_model_level", "synthetic_layerwise_completion_over_model_level",
                  "gpu_layerwise_capacity_over_model_level", "gpu_layerwise_completion_over_model_level",
                  "served_layerwise_on_time_over_model_level", "served_layerwise_completion_over_model_level"},
    "variants": {"variants_accuracy_at_half_budget_vs_best", "variants_accuracy_at_half_budget_vs_cheapest",
                 "variants_accuracy_full_budget_vs_best", "variants_step_switches"},
    "device": {"probe_capacity_gain", "probe_capacity_gain_mobilenet_v3_small", "served_good_at_quarter_c32"},
    "soak": {"rss_growth_pct_max", "fd_growth_max", "topics_start", "topics_end", "slo_attainment", "frames",
             "frames_lost"},
}
SEPARATE = {"soak"}
"""Checked by a run of their own (tests/bench/test_soak.py: a shorter soak than --quick, whose
growths may be negative and whose losses must be 0)."""


def test_every_benchmark_is_covered():
    assert set(BENCHMARKS) == set(SUMMARY_KEYS)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", sorted(set(SUMMARY_KEYS) - SEPARATE))
def test_quick_run_writes_the_json(name, tmp_path):
    out = tmp_path / f"{name}.json"
    p = subprocess.run([sys.executable, "-m", "vidnexus", "bench", name, "--quick", "--json", str(out)],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert {"name", "machine", "config", "results", "summary"} <= set(doc)
    assert doc["name"] == name and doc["config"]["quick"] is True
    assert doc["machine"]["cores"] >= 1 and "command" in doc["machine"]
    assert SUMMARY_KEYS[name] <= set(doc["summary"])
    for k in SUMMARY_KEYS[name]:
        v = doc["summary"][k]
        assert isinstance(v, (int, float)) and math.isfinite(v), (k, v)
        if "delta" not in k:  # accuracy deltas may be negative; ratios, rates and times may not
            assert v > 0, (k, v, p.stdout[-4000:])  # the run's own lines say which trial fell short
    if name == "preprocess":  # what travels is smaller than the tensor the executor makes of it
        assert doc["summary"]["frame_wire_over_float32"] < 0.25 and doc["summary"]["crop_wire_over_float32"] < 0.5
        assert {r["mode"] for r in doc["results"]} == {"serial", "overlapped", "overlapped (caller)",
                                                      "overlapped (auto)", "device only"}
    if name == "weg":  # every specialization is one template's; the one-template rows are compact_a's
        for r in doc["results"]:
            assert sum(r["specializations_by_template"].values()) == r["specializations"], r
        assert sum(doc["summary"]["specializations_by_template"].values()) == sum(
            r["specializations"] for r in doc["results"])
        assert {o["template"] for o in doc["summary"]["one_template"]} == {"compact_a"}
        assert len(doc["summary"]["one_template"]) == 4
    if name == "scheduler":  # the bounds are bounds: below squishy and the exact optimum, the split one the tighter
        for r in doc["results"]:
            if "split_bound" in r:
                assert r["lower_bound"] <= r["split_bound"] + 1e-9 and r["over_split_bound"] >= 1.0, r  # means over seeds
                assert r["split_bound"] <= r["best_bound"] + 1e-9 and r["over_best_bound"] >= 1.0, r
        for s in next(r["small_instances"] for r in doc["results"] if "small_instances" in r):
            assert math.ceil(s["lower_bound"] - 1e-9) <= s["split_bound"] <= s["best_bound"] <= s["exact"] <= s["squishy"], s
    if name == "cluster":  # every request is answered on time, late, or dropped with a reason
        for r in doc["results"]:
            assert r["requests"] == r["on_time"] + r["late"] + sum(r["drops"].values()) > 0, r
            assert r["devices_over_lower_bound"] >= 1.0 and r["epochs"] >= 3, r
            assert r["epochs_short_of_executors"] == 0, r  # the pool never caps the planner
        assert doc["summary"]["step_reaction_s"] < doc["config"]["runs"]["step"]["day_s"] / 2
    if name == "layerwise":  # the served runs: both ways at each rate, shares of the requests sent
        for r in doc["served"]:
            ways = ("model", "layerwise", "layerwise_tardy")
            assert r["requests"] > 0 and all(0 <= r[f"on_time_{p}"] <= 1 for p in ways), r
            assert all(r[f"mean_batch_{p}"] >= 1 for p in ways), r
    if name == "apps":  # every frame sent has its outcome; each app has both modes and the target's fields
        s = doc["summary"]
        assert s["frames_accounted"] == s["frames_sent"]
        for app in ("traffic", "dance", "game"):
            for k in ("kafka_fps", "embedded_fps", "target_fps"):
                assert isinstance(s[f"{app}_{k}"], (int, float)) and s[f"{app}_{k}"] >= 0, (app, k)
            assert s[f"{app}_target_fps"] == pytest.approx(min(3 * s[f"{app}_baseline_fps"],
                                                               0.7 * s[f"{app}_embedded_fps"]), abs=0.01)
            assert isinstance(s[f"{app}_meets_target"], bool)
            assert {r["mode"] for r in doc["results"] if r["app"] == app} == {"kafka", "embedded"}
        assert isinstance(s["all_meet_target"], bool)
        for r in doc["results"]:
            assert r["frames_accounted"] == r["frames_sent"] > 0, r
    if name == "hop":  # each arm deleted its topics (a full run writes gigabytes of requests)
        assert doc["summary"]["topics_left"] == 0 and {r["topics_left"] for r in doc["results"]} == {0}, doc["summary"]
        # each arm warmed first, and its warm-up is out of the figures
        assert {(r["driver"], r["linger_ms"]) for r in doc["warm_ups"]} == {(r["driver"], r["linger_ms"]) for r in doc["results"]}
        assert all(r["warm_up"] for r in doc["warm_ups"]) and not any(r["warm_up"] for r in doc["results"])
    if name == "broker-jvm":  # quick: the default's broker alone; every request on time or missed by why
        s = doc["summary"]
        assert s["ranking"] == [s["default"]] and s["default_is_best"] is True and s["topics_left"] == 0, s
        for r in doc["results"]:
            assert r["requests"] > 0 and r["missed"] == sum(r["missed_by_why"].values()), r
            assert r["cpu_ms_per_request"]["broker"] > 0 and r["cpu_ms_per_request"]["executor"] > 0, r
        for p in doc["probes"]:
            assert p["on_time"] + sum(v for k, v in p.items() if k == "late" or k.startswith("dropped:")) == p["requests"], p
    if name in ("peers", "peers-real"):  # vnx-kafka's executor took its topics with it
        left = {k: v for k, v in doc["summary"].items() if k.endswith("vnx_kafka_topics_left")}
        assert len(left) == (1 if name == "peers" else 2) and set(left.values()) == {0}, left
        # the VM's speed checked before vidnexus's cell, before each peer and at the end; its drift reported
        configs = [doc["config"]] if name == "peers" else list(doc["config"]["models"].values())
        for c in configs:
            assert [k["before"] for k in c["speed_checks"]] == ["vnx single@100", "triton", "ray-handle", "end"]
            assert all(k["batch8_ms"] >= k["batch1_ms"] > 0 for k in c["speed_checks"]), c["speed_checks"]
        drifts = [v for k, v in doc["summary"].items() if k.endswith("speed_drift")]
        assert len(drifts) == len(configs) and all(d >= 1.0 for d in drifts), drifts
        # vidnexus's searches report each process's CPU per request during the 80% probe (quick: one round)
        assert all(c["vnx_rounds"] == 1 for c in configs)
        for r in doc["results"]:
            if r["system"] in ("vnx-inproc", "vnx-kafka") and r["goodput"] > 0:
                cpu = r["cpu_ms_per_request"]
                assert set(cpu) == ({"process"} if r["system"] == "vnx-inproc" else {"client", "executor", "broker"}), r
                assert all(v >= 0 for v in cpu.values()) and cpu.get("process", cpu.get("executor", 0)) > 0, r
                assert r["round"] == 0, r
        # every search logs its probes, each one's misses by why adding up to its requests
        for r in doc["results"]:
            assert len(r["probe_log"]) == r["probes"] > 0, r
            for p in r["probe_log"]:
                missed = sum(v for k, v in p.items() if k == "late" or k.startswith("dropped:"))
                assert p["on_time"] + missed == p["requests"], (r["system"], p)
        # vidnexus's searches of a cell ran in lock step (one probe of each in turn): their spans overlap
        for model in {r["model"] for r in doc["results"]}:
            spans = {r["system"]: r["span_s"] for r in doc["results"]
                     if r["model"] == model and r["system"] in ("vnx-inproc", "vnx-kafka")}
            assert set(spans) == {"vnx-inproc", "vnx-kafka"}, spans
            (a0, a1), (b0, b1) = spans["vnx-inproc"], spans["vnx-kafka"]
            assert a0 < b1 and b0 < a1, spans
    if name == "peers-real":  # both real models, every system measured on each, each from its package file
        assert {(r["model"], r["system"]) for r in doc["results"]} == {
            (m, s) for m in ("hud_text", "pose_landmarks") for s in ("vnx-inproc", "vnx-kafka", "triton", "ray-handle")}
        assert doc["config"]["models"]["hud_text"]["image"] == [48, 320, 3]
        assert doc["config"]["models"]["pose_landmarks"]["image"] == [256, 256, 3]
        assert {"onnxruntime", "ai-edge-litert"} <= set(doc["machine"]["peers"])
    if name == "apps-real":  # the real-model apps: every frame accounted, both modes, no target
        s = doc["summary"]
        assert s["frames_accounted"] == s["frames_sent"] > 0
        for app in ("hudtext", "people"):
            assert {r["mode"] for r in doc["results"] if r["app"] == app} == {"kafka", "embedded"}
            assert f"{app}_target_fps" not in s and s[f"{app}_kafka_fps"] >= 0
            streams = {r["streams"] for r in doc["results"] if r["app"] == app}
            assert streams == {2}, streams  # --quick: one trial of two streams per mode
        for r in doc["results"]:
            assert r["frames_accounted"] == r["frames_sent"] > 0, r
