"""A two-stage app for the control-plane test: a frame classifier (MobileNetV3-Small, random weights:
compute cost only) then the digit reader on each of the frame's 6 HUD cells (fan-out γ = 6)."""

import cv2
import numpy as np

from vidnexus.apps.hud import crop_cells, reader as hud_reader
from vidnexus.operators.chain import App, Stream
from vidnexus.streams.images import image_of

app = App("two_stage", slo_ms=1000)
scene = app.model("mobilenet_v3_small")
reader = app.model(hud_reader.name, decode=hud_reader.decode)
rows = app.table("two_stage_rows", {"field": "String", "idx": "UInt8", "digit": "UInt8"})


def scene_input(f):
    img = cv2.resize(image_of(f), (224, 224), interpolation=cv2.INTER_AREA)
    return np.ascontiguousarray(img.transpose(2, 0, 1), np.float32) / 255.0


def cells(r):
    return crop_cells(r.value).cells


@app.chain
def pipeline(frames: Stream) -> Stream:
    return (frames.infer(scene, input=scene_input)
            .flat_map(cells)
            .infer(reader, input=lambda c: c.input, merge=lambda c, d: {"field": c.field, "idx": c.index, "digit": d})
            .sink(rows))
