"""The traffic app's tracker and line counter against supervision's ByteTrack and LineZone, on the
same frames and the same motion detections (issue 23 item 2: use the field's library, or show with
numbers why the project's own is better here).

Both sides get the frames the app gets (ingest at 5 sampled fps) and the boxes of the app's
background subtraction (`MotionDetector` on the 384-px image). Own: `IouTracker` (IoU or centre
distance ≤ 40 px) + the moving-track rule (≥ 5 sightings, ≥ 40 px of travel) + `LineCounter`. ByteTrack
(`sv.ByteTrack(frame_rate=5)`, every box at confidence 0.9: background subtraction has no score) with
the same moving-track rule, and `sv.LineZone` on box centres. Truth: the hand count for the real video
(tests/data/hand_counts.json), the generator's `entered` for the synthetic cameras.

    bash scripts/compare-trackers.sh      # a side virtualenv with supervision 0.26.1 (the last with ByteTrack)

Writes bench/results/trackers-DATE.json (the command, machine and versions inside).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vidnexus.benchmarks.machine import machine_info  # noqa: E402
from vidnexus.connectors.memory_bus import MemoryBus  # noqa: E402
from vidnexus.contracts.frames import decode_frame  # noqa: E402
from vidnexus.operators.cv import MotionDetector, Resize  # noqa: E402
from vidnexus.operators.tracking import IouTracker, moving_tracks  # noqa: E402
from vidnexus.operators.zones import Line, LineCounter  # noqa: E402
from vidnexus.streams.images import image_of  # noqa: E402
from vidnexus.streams.ingest import StreamSpec, StreamWorker  # noqa: E402

VIDEO = (ROOT / ".." / "shared" / "data" / "real" / "car-detection.mp4").resolve()
HAND = json.loads((ROOT / "tests" / "data" / "hand_counts.json").read_text())["car-detection.mp4"]
MIN_HITS, MIN_MOVE = 5, 40.0


def frames(url: str, fps: float = 5.0, until_s: float | None = None) -> list:
    bus = MemoryBus(retain_bytes=1 << 34)
    consumer = bus.subscribe(["f"], group=None)
    StreamWorker(StreamSpec("cam", url, fps=fps, until_s=until_s), bus, "f").run()
    out = []
    while batch := consumer.poll(timeout_s=0.2):
        out += [decode_frame(m.value) for m in batch]
    return out


def own(fs: list, line: Line | None) -> dict:
    resize, motion = Resize(384), MotionDetector(min_area=1500, warmup=5)
    tracker = IouTracker(iou_threshold=0.1, max_missed=3, max_center_distance=40, keep_finished=10_000)
    lines = LineCounter([line]) if line else None
    crossings = {"in": 0, "out": 0}
    ids = set()
    for n, f in enumerate(fs):
        small, scale = resize(image_of(f))
        seen = tracker.update(motion.apply(small), n)
        counting = {t.track_id for t in moving_tracks(seen, MIN_HITS, MIN_MOVE)}
        for t in seen:
            ids.add(t.track_id)
            if lines is not None:
                b = t.box
                centre = ((b.x1 + b.x2) / 2 / scale, (b.y1 + b.y2) / 2 / scale)
                for c in lines.update(t.track_id, centre, counts=t.track_id in counting):
                    crossings[c.direction] += 1
    every = list(tracker.finished) + list(tracker.live)
    return {"counted": len(moving_tracks(every, MIN_HITS, MIN_MOVE)), "track_ids": len(ids),
            "crossings": crossings if line else None}


MATCHING = (0.8, 0.9, 0.95, 0.99)
"""ByteTrack's ``minimum_matching_threshold`` (1 − the IoU a match needs): its default 0.8, and looser
ones that let a box 5 fps later match with less overlap; each is reported, the summary takes the best."""


def bytetrack(fs: list, line: Line | None, matching: float = 0.8) -> dict:
    import supervision as sv

    resize, motion = Resize(384), MotionDetector(min_area=1500, warmup=5)
    tracker = sv.ByteTrack(frame_rate=5, minimum_matching_threshold=matching)
    zone = None
    history: dict[int, list[tuple[float, float]]] = {}
    for f in fs:
        small, scale = resize(image_of(f))
        boxes = motion.apply(small)
        xyxy = np.array([[b.x1, b.y1, b.x2, b.y2] for b in boxes], dtype=np.float32).reshape(-1, 4)
        det = sv.Detections(xyxy=xyxy, confidence=np.full(len(xyxy), 0.9, np.float32),
                            class_id=np.zeros(len(xyxy), int))
        tracked = tracker.update_with_detections(det)
        if line is not None and zone is None:
            zone = sv.LineZone(sv.Point(line.x1 * scale, line.y1 * scale), sv.Point(line.x2 * scale, line.y2 * scale),
                               triggering_anchors=[sv.Position.CENTER])
        if zone is not None:
            zone.trigger(tracked)
        for (x1, y1, x2, y2), tid in zip(tracked.xyxy, tracked.tracker_id):
            history.setdefault(int(tid), []).append(((x1 + x2) / 2, (y1 + y2) / 2))
    counted = sum(1 for h in history.values() if len(h) >= MIN_HITS
                  and max(np.hypot(x - h[0][0], y - h[0][1]) for x, y in h) >= MIN_MOVE)
    return {"matching": matching, "counted": counted, "track_ids": len(history),
            "crossings": {"in": int(zone.in_count), "out": int(zone.out_count)} if zone is not None else None}


def bytetracks(fs: list, line: Line | None) -> list[dict]:
    return [bytetrack(fs, line, m) for m in MATCHING]


def main() -> None:
    import supervision as sv

    line = Line("mid", *HAND["line_mid"]["line"])
    rows = []
    fs = frames(str(VIDEO))
    rows.append({"stream": "car-detection.mp4", "frames": len(fs), "truth": HAND["vehicles"],
                 "truth_crossings": {"in": HAND["line_mid"]["in"], "out": HAND["line_mid"]["out"]},
                 "own": own(fs, line), "bytetrack": bytetracks(fs, line)})
    for seed, rush in ((1, 0), (2, 1), (3, 0), (4, 1)):
        fs = frames(f"synthetic://traffic?seed={seed}&fps=10&seconds=120&rush={rush}")
        rows.append({"stream": f"synthetic seed {seed} rush {rush}", "frames": len(fs),
                     "truth": int(fs[-1].tags.get("entered", -1)), "own": own(fs, None),
                     "bytetrack": bytetracks(fs, None)})
    for r in rows:
        bt = "  ".join(f"{b['counted']} ({b['track_ids']} ids{', ' + str(b['crossings']) if b['crossings'] else ''})"
                       for b in r["bytetrack"])
        print(f"{r['stream']:26s} truth {r['truth']:3d}  own {r['own']['counted']:3d} ({r['own']['track_ids']} ids"
              f"{', ' + str(r['own']['crossings']) if r['own']['crossings'] else ''})  bytetrack at {MATCHING}: {bt}")
    err_own = sum(abs(r["own"]["counted"] - r["truth"]) for r in rows)
    err_bt = {m: sum(abs(r["bytetrack"][k]["counted"] - r["truth"]) for r in rows) for k, m in enumerate(MATCHING)}
    best = min(err_bt, key=lambda m: err_bt[m])
    hand = rows[0]["truth_crossings"]
    today = dt.date.today().isoformat()
    out = ROOT / "bench" / "results" / f"trackers-{today}.json"
    doc = {"name": "trackers", "machine": {**machine_info(), "command": "bash scripts/compare-trackers.sh",
                                           "supervision": sv.__version__},
           "config": {"sampled_fps": 5, "min_hits": MIN_HITS, "min_displacement_px": MIN_MOVE,
                      "detections": "MotionDetector(min_area=1500) on the 384-px image",
                      "own": "IouTracker(iou 0.1, centre distance 40 px, max_missed 3) + LineCounter",
                      "bytetrack": "sv.ByteTrack(frame_rate=5, minimum_matching_threshold=m), confidence 0.9 + "
                                   "sv.LineZone(CENTER)", "bytetrack_matching": list(MATCHING)},
           "results": rows,
           "summary": {"own_count_abs_error": err_own, "bytetrack_count_abs_error_by_matching": err_bt,
                       "bytetrack_best_matching": best, "bytetrack_count_abs_error_best": err_bt[best],
                       "own_crossings_match_hand": rows[0]["own"]["crossings"] == hand,
                       "linezone_crossings_match_hand_any_matching": any(b["crossings"] == hand
                                                                         for b in rows[0]["bytetrack"])}}
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc["summary"]), "→", out.relative_to(ROOT))


if __name__ == "__main__":
    main()
