"""Counting vehicles on real footage against a count made by a person (tests/data/hand_counts.json)."""

import json
from pathlib import Path

import cv2
import pytest

from vidnexus.operators.cv import MotionCounter

ROOT = Path(__file__).resolve().parents[2]
VIDEO = ROOT.parents[1] / "shared" / "data" / "real" / "car-detection.mp4"
HAND = json.loads((ROOT / "data" / "hand_counts.json").read_text())["car-detection.mp4"]


@pytest.mark.parametrize("fps", [3, 5, 10])
def test_vehicle_count_matches_the_hand_count(fps):
    assert VIDEO.exists(), f"test video missing: {VIDEO}"
    cap = cv2.VideoCapture(str(VIDEO))
    step = max(1, round(cap.get(cv2.CAP_PROP_FPS) / fps))
    counter = MotionCounter()
    n = 0
    while True:
        ok, img = cap.read()
        if not ok:
            break
        if n % step == 0:
            counter.apply(img)
        n += 1
    cap.release()
    got = counter.count()
    want = HAND["vehicles"]
    assert abs(got - want) <= 0.2 * want, f"counted {got} vehicles, a person counted {want}"
