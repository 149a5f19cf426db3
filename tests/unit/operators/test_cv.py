"""CPU operators on real footage (../shared/data/real, CC BY 4.0) and on drawn scenes.

Frames of one-by-one-person-detection.mp4 (10 fps) were chosen by looking at them: the room is
empty at frames 0, 200, 500 and 900; one person stands by the table at 120, 400, 800, 1100 and 1300
(every one seen from behind, in the middle third of the image)."""

from pathlib import Path

import cv2
import numpy as np
import pytest

from vidnexus.operators.cv import (FrameDiffSkip, HaarDetector, HogPeopleDetector, MotionDetector,
                                   RegionOfInterest, Resize, crop_boxes)
from vidnexus.operators.tracking import Box, IouTracker, nms

VIDEO = Path(__file__).resolve().parents[4] / "shared" / "data" / "real" / "one-by-one-person-detection.mp4"
EMPTY = (0, 200, 500, 900)
PERSON = (120, 400, 800, 1100, 1300)


@pytest.fixture(scope="module")
def frames():
    assert VIDEO.exists(), f"test video missing: {VIDEO}"
    cap = cv2.VideoCapture(str(VIDEO))
    out = {}
    for n in sorted(EMPTY + PERSON + (80,)):
        cap.set(cv2.CAP_PROP_POS_FRAMES, n)
        ok, img = cap.read()
        assert ok, f"cannot read frame {n}"
        out[n] = img
    cap.release()
    return out


def in_person_region(b: Box) -> bool:
    cx, _ = b.center
    return 300 <= cx <= 600


@pytest.fixture(scope="module")
def hog():
    return HogPeopleDetector()


@pytest.mark.parametrize("n", PERSON)
def test_hog_finds_the_person(frames, hog, n):
    boxes = hog.detect(frames[n])
    assert any(in_person_region(b) and b.label == "person" for b in boxes), boxes


@pytest.mark.parametrize("n", EMPTY)
def test_hog_finds_nobody_in_the_empty_room(frames, hog, n):
    assert hog.detect(frames[n]) == []


def test_haar_upper_body_on_real_frames(frames):
    # The upper-body cascade sees these two people from behind; it stays silent on the empty room.
    haar = HaarDetector("upperbody", max_side=768, min_neighbors=3)
    for n in (80, 800):
        assert any(in_person_region(b) for b in haar.detect(frames[n])), n
    for n in EMPTY:
        assert haar.detect(frames[n]) == [], n


def test_haar_face_cascade_loads_and_an_empty_image_has_no_face():
    assert HaarDetector("face").detect(np.full((240, 320, 3), 128, np.uint8)) == []
    with pytest.raises(ValueError, match="cannot load cascade"):
        HaarDetector("/no/such/cascade.xml")


def test_motion_detector_sees_a_moving_square_after_warmup():
    md = MotionDetector(warmup=5, min_area=100)
    boxes_seen = []
    for i in range(20):
        img = np.full((120, 160, 3), 60, np.uint8)
        if i >= 10:
            x = 20 + 5 * (i - 10)
            img[40:70, x : x + 30] = 230
        boxes_seen.append(md.apply(img))
    assert all(b == [] for b in boxes_seen[:10])             # static background: nothing moves
    last = boxes_seen[-1]
    assert len(last) == 1 and last[0].label == "motion"
    assert 60 <= last[0].center[0] <= 110 and 45 <= last[0].center[1] <= 65


def test_frame_diff_skip_keeps_changes_only():
    skip = FrameDiffSkip(threshold=4.0)
    a = np.full((90, 160, 3), 50, np.uint8)
    b = a.copy()
    b[:, :80] = 200
    assert [skip.keep(x) for x in (a, a.copy(), a + 1, b, b)] == [True, False, False, True, False]
    assert (skip.kept, skip.skipped) == (2, 3)


def test_roi_and_crops():
    roi = RegionOfInterest([(0, 0), (100, 0), (100, 100), (0, 100)])
    assert roi.keep([Box(10, 10, 20, 20), Box(150, 10, 170, 20)]) == [Box(10, 10, 20, 20)]
    img = np.arange(200 * 300 * 3, dtype=np.uint8).reshape(200, 300, 3)
    masked = roi.mask(img)
    assert masked[150, 150].sum() == 0 and (masked[50, 50] == img[50, 50]).all()
    crops = crop_boxes(img, [Box(290, 190, 320, 220), Box(10, 10, 30, 20)], pad=0.5)
    assert [c.shape for c in crops] == [(25, 25, 3), (20, 40, 3)]
    with pytest.raises(ValueError):
        Resize(0)


def test_nms_merges_part_detections():
    whole = Box(0, 0, 100, 200, 1.0)
    part = Box(10, 10, 60, 100, 1.5)
    other = Box(300, 0, 400, 200, 0.9)
    assert nms([whole, part, other], 0.3) == [part, whole, other]
    assert nms([whole, part, other], 0.3, containment=0.7) == [part, other]


def test_iou_tracker_follows_two_objects_and_finishes_lost_ones():
    t = IouTracker(iou_threshold=0.3, max_missed=1)
    ids = []
    for f in range(6):
        boxes = [Box(10 + 5 * f, 10, 50 + 5 * f, 50, label="car")]
        if f < 3:
            boxes.append(Box(200, 100 + 4 * f, 240, 140 + 4 * f, label="person"))
        ids.append([tr.track_id for tr in t.update(boxes, f)])
    assert ids == [[1, 2], [1, 2], [1, 2], [1], [1], [1]]
    assert [(tr.track_id, tr.first_frame, tr.last_frame) for tr in t.finished] == [(2, 0, 2)]
    done = t.close()
    assert [(tr.track_id, tr.hits) for tr in done] == [(2, 3), (1, 6)]
