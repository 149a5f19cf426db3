"""Model files run outside PyTorch: TFLite files in LiteRT's interpreter (an interpreter per batch
size, the batch resized in; a graph that cannot take a batch run input by input), ONNX files in onnxruntime — both picked by file_runner, both giving a batch the rows its
inputs give alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vidnexus.apps.people.models import landmark_file
from vidnexus.errors import ModelError
from vidnexus.gpu_executor.runner import OnnxRunner, TfliteRunner, file_runner


def test_a_tflite_batch_gives_each_inputs_own_row():
    runner = file_runner("pose_landmarks", landmark_file(), postprocess=lambda r: r)
    assert isinstance(runner, TfliteRunner) and runner.input_shape == (1, 256, 256, 3)
    rng = np.random.default_rng(0)
    xs = [rng.random((256, 256, 3), dtype=np.float32) for _ in range(3)]
    together = runner(xs)
    assert len(together) == 3 and together[0].shape == (195,)
    for x, row in zip(xs, together):
        np.testing.assert_allclose(runner([x])[0], row, rtol=1e-4, atol=1e-3)
    assert not np.allclose(together[0], together[1])  # different inputs, different rows


def test_a_model_whose_graph_fixes_its_batch_runs_its_inputs_one_by_one():
    # BlazePose's detector reshapes with a batch of 1 built in: resized to 2 it mixes the inputs
    # (its output is [1, 2·2254, 12]). The runner notices and runs them one after another.
    detector = str(Path(landmark_file()).parents[1] / "pose_detection" / "pose_detection.tflite")
    runner = TfliteRunner("pose_detection", detector, postprocess=lambda r: r)
    rng = np.random.default_rng(1)
    xs = [rng.random((224, 224, 3), dtype=np.float32) for _ in range(2)]
    alone = [runner([x])[0] for x in xs]
    assert runner.batches
    rows = runner(xs)
    assert not runner.batches and [r.shape for r in rows] == [(2254, 12)] * 2
    for a, r in zip(alone, rows):
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-3)


def test_file_runner_picks_onnx_for_other_files_and_a_bad_file_is_a_model_error(tmp_path):
    from vidnexus.apps.hudtext.models import rec_file

    assert isinstance(file_runner("hud_text", rec_file()), OnnxRunner)
    bad = tmp_path / "broken.tflite"
    bad.write_bytes(b"not a flatbuffer")
    with pytest.raises(ModelError, match="LiteRT cannot load"):
        TfliteRunner("broken", str(bad))


def test_an_onnx_runners_threads_sleep_between_batches():
    # onnxruntime's intra-op pool spins between runs by default: on a host whose other roles share
    # the CPU (embedded mode) that spinning took a core from them while the device thread waited.
    from vidnexus.apps.hudtext.models import rec_file

    options = file_runner("hud_text", rec_file()).session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
