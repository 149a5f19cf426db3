"""Nothing float on the wire: workers send uint8 crops and JPEG frames, the executor makes the
models' tensors on its CPU pool. The apps' models get exactly the tensors the workers used to build,
a bad input is a drop for that request only, and the requests are a fraction of the size."""

from __future__ import annotations

import asyncio
import re

import cv2
import numpy as np
import pytest

from vidnexus.config import Settings
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.requests import InferRequest, Jpeg, decode_request, encode_request
from vidnexus.contracts.sessions import SessionKey
from vidnexus.gpu_executor.client import ExecutorClient
from vidnexus.gpu_executor.preprocess import ImageInput, wire_input
from vidnexus.roles.executor import ExecutorRole, repository_inputs
from vidnexus.testing import FakeClock, FakeRunner

RNG = np.random.default_rng(7)


def _image(h: int, w: int) -> np.ndarray:
    return RNG.integers(0, 256, (h, w, 3), dtype=np.uint8)


def test_the_apps_models_get_the_tensors_their_workers_used_to_build():
    """The conversions that moved from the workers to the executor give the same float32 values
    (the formulas below are the workers' before the move; within float32 rounding: OpenCV scales by
    1/255 where numpy divided by 255)."""
    from vidnexus.apps.dance.models import DANCE_POSE, figure_crop
    from vidnexus.apps.game.models import COMPACT_MODEL, MODELS as GAME_MODELS
    from vidnexus.apps.traffic.models import CAR_COLOURS

    crop = _image(37, 71)
    old = (cv2.resize(crop, (32, 32), interpolation=cv2.INTER_AREA).astype(np.float32) / 255.0).transpose(2, 0, 1)
    assert np.allclose(CAR_COLOURS.prepare(crop), old, rtol=0, atol=1e-6)

    frame = np.zeros((180, 320, 3), np.uint8)
    frame[40:160, 100:140] = 200
    fig, _ = figure_crop(frame)
    assert fig.dtype == np.uint8 and fig.shape == (64, 64, 3)
    assert np.allclose(DANCE_POSE.prepare(fig), fig.astype(np.float32).transpose(2, 0, 1) / 255.0, rtol=0, atol=1e-6)

    icon = _image(32, 32)
    compact = next(e for e in GAME_MODELS if e.name == COMPACT_MODEL)
    assert np.allclose(compact.prepare(icon), icon.transpose(2, 0, 1).astype(np.float32) / 255.0, rtol=0, atol=1e-6)


def test_a_zoo_model_takes_a_frames_jpeg_as_it_came_from_ingest():
    """The compute-only stages send the frame's JPEG bytes untouched; the executor decodes, resizes
    to the model's input and swaps to RGB (what the worker did before)."""
    frame = np.zeros((432, 768, 3), np.uint8)  # a scene-like frame: gradients and shapes
    frame[:] = np.linspace(40, 200, 768, dtype=np.uint8)[None, :, None]
    cv2.rectangle(frame, (100, 200), (260, 280), (20, 30, 220), -1)
    cv2.circle(frame, (500, 150), 60, (200, 180, 30), -1)
    ok, jpg = cv2.imencode(".jpg", frame)
    assert ok
    to_tensor = repository_inputs(Settings())("ssdlite")
    assert to_tensor is not None
    x = to_tensor(Jpeg(jpg.tobytes()))
    decoded = cv2.imdecode(jpg, cv2.IMREAD_COLOR)
    small = cv2.resize(decoded, (320, 320), interpolation=cv2.INTER_AREA)
    assert x.shape == (3, 320, 320) and x.dtype == np.float32
    assert np.allclose(x, small[:, :, ::-1].transpose(2, 0, 1).astype(np.float32) / 255.0, rtol=0, atol=1e-6)
    assert len(jpg) < x.nbytes / 10  # the request is a tenth of the tensor's size, or less


def test_inputs_the_model_cannot_take_are_refused_with_the_model_named():
    prep = wire_input("car_colours", (3, 32, 32), ImageInput((3, 32, 32), "bgr"))
    assert prep(np.zeros((3, 32, 32), np.float32)).shape == (3, 32, 32)  # a tensor passes as it is
    assert prep(np.zeros((3, 32, 32), np.float64)).dtype == np.float32
    for bad, what in [(np.zeros((3, 16, 16), np.float32), "float32 (3, 16, 16)"),
                      (np.zeros((3, 32, 32), np.int64), "int64 (3, 32, 32)"),
                      (np.zeros((0, 5, 3), np.uint8), "uint8 (0, 5, 3)"),
                      ("pixels", "str")]:
        with pytest.raises(ValueError, match=rf"model car_colours takes a \(3, 32, 32\) tensor or a uint8 image; got {re.escape(what)}"):
            prep(bad)
    with pytest.raises(ValueError, match="undecodable JPEG"):
        prep(Jpeg(b"\xff\xd8 not a jpeg"))
    plain = wire_input("user_model", (4,), None)  # a registered model without a conversion
    with pytest.raises(ValueError, match=r"takes a \(4,\) tensor \(float32\); got uint8"):
        plain(np.zeros((2, 2, 3), np.uint8))


def test_the_repository_knows_the_conversion_of_every_catalogue_model():
    inputs = repository_inputs(Settings())
    assert inputs("car_colours")(_image(20, 50)).shape == (3, 32, 32)
    assert inputs("hud_digits")(_image(24, 16)).shape == (1, 28, 28)
    assert inputs("lenet5")(_image(28, 28)).shape == (1, 28, 28)
    assert inputs("resnet18")(_image(100, 120)).shape == (3, 224, 224)
    assert inputs("not-a-model") is None  # an app's own loader: requests reach it as they came


def test_uint8_and_jpeg_inputs_cross_the_wire_at_a_fraction_of_a_tensors_size():
    crop = _image(64, 64)
    ok, jpg = cv2.imencode(".jpg", _image(432, 768))
    req = InferRequest("r", "car_colours-100ms", 1.0, "vnx.replies.w", (crop, Jpeg(jpg.tobytes())))
    raw = encode_request(req)
    back = decode_request(raw).inputs
    assert np.array_equal(back[0], crop) and back[0].dtype == np.uint8
    assert back[1] == Jpeg(jpg.tobytes())
    as_tensors = encode_request(InferRequest("r", "s", 1.0, "t", (crop.astype(np.float32),)))
    assert len(encode_request(InferRequest("r", "s", 1.0, "t", (crop,)))) < len(as_tensors) / 3.5


def test_a_bad_input_is_a_drop_for_that_request_only_the_rest_of_its_message_is_answered():
    """Conversion runs per request on the executor's pool before batching, so a request the model
    cannot take ends as ``error`` alone — inside the runner it would have failed the whole batch."""
    clock = FakeClock(wall_start=1_800_000_000.0)
    bus = MemoryBus(clock=clock)
    settings = Settings(topic_prefix="pp")
    seen: list[tuple[int, ...]] = []

    def fn(x):
        seen.append(x.shape)
        return float(x.mean())

    runner = FakeRunner(Profile.linear(0.001, 0.001, 16), clock, fn=fn)
    key = SessionKey("m", 1000)
    role = ExecutorRole(settings, [key], bus=bus, clock=clock, executor_id="e1", stats_every_s=1e9,
                        follow_plans=False, load=lambda names: ({"m": runner}, {"m": runner.profile}),
                        inputs=lambda m: wire_input(m, (3, 8, 8), ImageInput((3, 8, 8), "bgr")))
    role.start()
    client = ExecutorClient(bus, settings, "w", clock=clock)
    white = np.full((20, 30, 3), 255, np.uint8)
    inputs = [white, np.zeros((3, 8, 8), np.float32), np.zeros((5,), np.float32), Jpeg(b"junk"), white[:4, :4]]
    futs = client.submit_many(str(key), inputs, deadline_wall=clock.wall() + 1.0, expires_wall=clock.wall() + 5)

    async def go():
        for _ in range(5_000):
            if all(f.done() for f in futs):
                break
            role.step(timeout_s=0.0)
            await asyncio.sleep(0.0005)

    try:
        asyncio.run(go())
        replies = [f.result(timeout=0) for f in futs]
    finally:
        client.close()
        role.close()
    assert [(r.ok, r.reason) for r in replies] == [(True, None), (True, None), (False, "error"), (False, "error"),
                                                   (True, None)]
    assert replies[0].output == pytest.approx(1.0) and replies[1].output == 0.0
    assert seen and set(seen) == {(3, 8, 8)}  # the runner saw model-shaped tensors only


def test_a_registered_model_whose_clients_send_images(tmp_path):
    """``vidnexus models register … --images rgb``: the executor resizes and scales what clients send;
    without it the model takes float tensors of its input shape only."""
    import torch

    from vidnexus.errors import ModelError
    from vidnexus.gpu_executor.repository import ModelRepository, ModelSpec

    path = tmp_path / "tiny.pt"
    torch.jit.script(torch.nn.Sequential(torch.nn.Conv2d(3, 2, 3), torch.nn.AdaptiveAvgPool2d(1),
                                         torch.nn.Flatten())).save(str(path))
    settings = Settings(data_dir=tmp_path / "data")
    repo = ModelRepository(settings.data_dir / "models")
    repo.register(ModelSpec("tiny_img", f"torchscript:{path}", (3, 16, 16), images="rgb"))
    repo.register(ModelSpec("tiny_tensor", f"torchscript:{path}", (3, 16, 16)))
    inputs = repository_inputs(settings)
    img = _image(40, 30)
    x = inputs("tiny_img")(img)
    want = cv2.resize(img, (16, 16), interpolation=cv2.INTER_AREA)[:, :, ::-1].transpose(2, 0, 1) / np.float32(255)
    assert x.shape == (3, 16, 16) and np.allclose(x, want.astype(np.float32), rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="tiny_tensor takes a"):
        inputs("tiny_tensor")(img)
    with pytest.raises(ModelError, match="rgb images need an input shape 3xHxW"):
        ModelSpec("bad", f"torchscript:{path}", (16, 16, 3), images="rgb")
    with pytest.raises(ModelError, match="choose rgb, bgr or gray"):
        ModelSpec("bad", f"torchscript:{path}", (3, 16, 16), images="yuv")


def test_auto_converts_cheap_inputs_in_the_caller_and_dear_ones_on_the_pool():
    import threading
    import time

    from vidnexus.contracts.profile import Profile
    from vidnexus.gpu_executor.backend import SessionSpec
    from vidnexus.gpu_executor.executor import Executor

    where: dict[str, set[str]] = {"cheap": set(), "dear": set()}

    def converter(name, cost_s):
        def convert(x):
            where[name].add(threading.current_thread().name)
            time.sleep(cost_s)
            return x
        return convert

    ex = Executor([SessionSpec("c", "cheap", 60.0), SessionSpec("d", "dear", 60.0)],
                  {"cheap": lambda xs: list(xs), "dear": lambda xs: list(xs)},
                  {m: Profile.linear(0.001, 0.001, 8) for m in ("cheap", "dear")},
                  preprocess={"cheap": converter("cheap", 0.0), "dear": converter("dear", 0.003)})
    assert ex.preprocess_on == "auto"
    with ex:
        for i in range(20):
            assert ex.submit("c", i).result(timeout=10).ok and ex.submit("d", i).result(timeout=10).ok
    me = threading.current_thread().name
    assert me in where["cheap"]  # measured cheap after the first: converted here, no hand-off
    assert me not in where["dear"]  # 3 ms each: always on the pool
