"""The peers' side of `bench peers` / `peers-real` (vidnexus/benchmarks/peers_harness.py) converts each
request and answers it as the vidnexus executor does for the same model: the comparison is fair only
if every system does the same work per request. Checked here on the real models' files and the very
images the benchmark sends (the harness needs no peer for this: numpy and the model's runtime)."""

from __future__ import annotations

import numpy as np
import pytest

from vidnexus.benchmarks import peers_harness as harness
from vidnexus.benchmarks.peers import load_generator, real_workload


@pytest.fixture(scope="module")
def workloads():
    return {name: real_workload(name) for name in ("hud_text", "pose_landmarks")}


def test_the_load_generator_conversion_is_the_executors(tmp_path):
    w = load_generator(tmp_path)
    ours = w.converter("m")(w.image)
    theirs = harness._convert("argmax", w.image[None])[0]
    assert theirs.shape == ours.shape == (3, 224, 224) and theirs.dtype == np.float32
    np.testing.assert_allclose(theirs, ours, atol=1e-6)


@pytest.mark.parametrize("name,kind", [("hud_text", "text"), ("pose_landmarks", "pose")])
def test_real_models_are_converted_as_the_executor_converts_them(workloads, name, kind):
    w = workloads[name]
    assert w.kind == kind and w.image.dtype == np.uint8
    ours = w.converter(name)(w.image)
    theirs = harness._convert(kind, w.image[None])[0]
    assert theirs.shape == ours.shape and theirs.dtype == np.float32
    np.testing.assert_allclose(theirs, ours, atol=1e-5)


@pytest.mark.parametrize("name", ["hud_text", "pose_landmarks"])
def test_real_models_answer_as_the_executor_answers(workloads, name):
    w = workloads[name]
    ours = w.runner(name, 1)([w.converter(name)(w.image)] * 2)
    theirs = harness.Served(str(w.model_file), w.kind, 1)(np.stack([w.image] * 2))
    assert len(theirs) == len(ours) == 2
    if name == "hud_text":
        assert theirs[0] == ours[0][0] == "SCORE 04217"  # the line the benchmark draws, read by both
    else:
        np.testing.assert_allclose(np.asarray(theirs[1]), np.asarray(ours[1]), atol=2e-3)
        assert len(theirs[0]) == 33 and max(v for _, _, v in theirs[0]) > 0.5  # a person is seen
