"""The HUD-text app reads a HUD it never rendered: PP-OCRv4's recogniser (ONNX, shipped in a
package) served by the executor, on HUD text drawn over the shared real videos in a TrueType font
the project never trained on; and the pieces: the text-line finder, the number parser, the CTC
decoder on the real model's scores, batches of the ONNX model, the generator's checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from vidnexus.apps.hudtext import number_in
from vidnexus.apps.hudtext.models import HUD_TEXT, _decode, rec_file, text_input
from vidnexus.apps.hudtext.render import FIELDS, HudTextSource, field_boxes
from vidnexus.errors import StreamError
from vidnexus.operators.cv import text_line
from vidnexus.streams.synthetic import synthetic_source


def _runner():
    from vidnexus.gpu_executor.runner import OnnxRunner

    return OnnxRunner("hud_text", rec_file(), postprocess=_decode)


def _text_crop(text: str, size: int = 22) -> np.ndarray:
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (360, 60), (40, 60, 50))
    ImageDraw.Draw(img).text((30, 12), text, font=ImageFont.load_default(size=size), fill=(240, 230, 200))
    return np.asarray(img)[:, :, ::-1].copy()


def test_the_real_recogniser_reads_text_in_batches_and_a_batch_reads_as_each_alone():
    runner = _runner()
    texts = ["SCORE 40917", "KILLS 08", "Level 3", "SCORE 271"]
    inputs = [text_input(text_line(_text_crop(t))) for t in texts]
    together = runner(inputs)
    assert [r[0].replace(" ", "") for r in together] == [t.replace(" ", "") for t in texts]  # spaces: often not
    assert all(0.8 <= r[1] <= 1.0 for r in together), together
    alone = [runner([x])[0] for x in inputs]
    assert [r[0] for r in alone] == [r[0] for r in together]


def test_a_blank_field_reads_as_no_number():
    out = _runner()([text_input(np.full((40, 200, 3), 70, np.uint8))])[0]
    assert number_in(out[0], "SCORE") == -1


def test_text_line_finds_the_line_in_a_larger_box():
    crop = _text_crop("SCORE 123", size=18)
    line = text_line(crop)
    assert 18 <= line.shape[0] <= 34 and 80 <= line.shape[1] <= 150, line.shape
    empty = np.full((40, 100, 3), 128, np.uint8)
    assert text_line(empty).shape == empty.shape


def test_the_generator_is_deterministic_and_refuses_bad_parameters():
    a = [f.truth for f in HudTextSource(seed=4, fps=5, seconds=2).frames()]
    b = [f.truth for f in HudTextSource(seed=4, fps=5, seconds=2).frames()]
    assert a == b and len(a) == 10 and all(set(t) == set(FIELDS) for t in a)
    assert a[-1]["score"] >= a[0]["score"]
    src = synthetic_source("synthetic://hudtext?seed=2&fps=5&seconds=1&video=people&style=panel")
    frame = next(iter(src.frames()))
    assert frame.image.shape == (src.height, src.width, 3)
    assert set(field_boxes(src.width, src.height)) == set(FIELDS)
    for bad in ("video=tv", "style=neon", "colour=red", "fps=0"):
        with pytest.raises(StreamError, match="hudtext|unknown|fps"):
            synthetic_source(f"synthetic://hudtext?{bad}")


def test_models_list_says_where_every_models_weights_come_from():
    from vidnexus.apps import model_catalog
    from vidnexus.gpu_executor.catalog import RANDOM_WEIGHTS
    from vidnexus.gpu_executor.zoo import ZOO

    assert all(e.weights == RANDOM_WEIGHTS for e in ZOO.values())
    apps = model_catalog()
    assert all(e.weights and e.weights != RANDOM_WEIGHTS for e in apps), [e.name for e in apps if e.weights == RANDOM_WEIGHTS]
    assert "PP-OCRv4" in HUD_TEXT.weights
    env = dict(os.environ, COLUMNS="400")
    out = subprocess.run([sys.executable, "-m", "vidnexus", "models", "list"], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = {ln.split("│")[1].strip(): ln for ln in out.stdout.splitlines() if ln.startswith("│")}
    assert "recognises nothing" in lines["ssdlite"] and "recognises nothing" in lines["resnet18"]
    assert "PaddleOCR" in lines["hud_text"] and "recognises nothing" not in lines["hud_text"]


@pytest.mark.timeout(300)
def test_the_hudtext_app_reads_a_hud_in_a_font_it_never_trained_on(tmp_path):
    """Two streams over the two real videos (the car park, the room), 20 s each sampled at 2.5 fps
    and read in real time, with the app's own 300 ms SLO on the embedded default: every frame is a
    row or an accounted drop, at least 95% of them rows, and at least 95% of the HUD values read
    are exactly the values drawn.

    Real time, and 10 recogniser requests a second: the model's profile on this 2-core host is
    42 ms for one text line and 72 ms for two, so that keeps the executor's device under half busy.
    At 5 fps (20 a second, about 70% busy) a CI run on a slower machine dropped 7 of 120 frames (here,
    with one core busy-looped, early drops); at 10 fps (40 a second) a run dropped anywhere from 0 to 45%, as an SLO
    executor that cannot keep up must."""
    data = tmp_path / "data"
    data.mkdir()
    env = dict(os.environ, VNX_DATA_DIR=str(data), VNX_BUS="memory", VNX_STORE="chdb")
    streams = [f"cam-{v}=synthetic://hudtext?seed={s}&fps=10&seconds=20&video={v}" for s, v in ((3, "car"), (8, "people"))]
    run = subprocess.run([sys.executable, "-m", "vidnexus", "run", "hudtext", *sum((["--stream", s] for s in streams), []),
                          "--fps", "2.5", "--rate", "realtime"], env=env, capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, run.stderr[-3000:]

    def sql(query: str) -> list[dict]:
        q = subprocess.run([sys.executable, "-m", "vidnexus", "sql", "--format", "json", query],
                           env=env, capture_output=True, text=True, timeout=120)
        assert q.returncode == 0, q.stderr[-2000:]
        return [json.loads(line) for line in q.stdout.splitlines()]

    status = {d["status"]: int(d["n"]) for d in sql(
        "SELECT status, count() AS n FROM vnx_frames FINAL WHERE app = 'hudtext' GROUP BY status")}
    assert sum(status.values()) == 100, status  # 2 streams × 20 s × 2.5 fps, each frame once
    assert status.get("ok", 0) >= 95, status
    (r,) = sql("SELECT count() AS n, sum(score_read = score_truth) + sum(kills_read = kills_truth) AS exact, "
               "countIf(score_truth < 0 OR kills_truth < 0) AS untold FROM hud_text_reads FINAL")
    assert int(r["n"]) == status["ok"] and int(r["untold"]) == 0
    print(f"hudtext: {status}, {int(r['exact'])} of {2 * int(r['n'])} values exact")
    assert int(r["exact"]) >= 0.95 * 2 * int(r["n"]), r
