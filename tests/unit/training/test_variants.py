"""The glyph task's variant catalog: real models, measured on a held-out set, cached per machine;
`vidnexus models variants` lists it and picks variants within budgets."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from vidnexus.training.variants import TASK, VARIANTS, held_out, load_or_measure, variant_models


@pytest.fixture(scope="module")
def catalog(model_cache_dir):
    return load_or_measure(model_cache_dir)


def test_the_catalog_measures_real_models_on_a_held_out_set_apart_from_training(catalog, model_cache_dir):
    from vidnexus.training.glyphs import render_dataset

    by = {v.name: v for v in catalog}
    assert tuple(by) == VARIANTS and all(v.task == TASK for v in catalog)
    # Accuracy is measured, not declared: the oracle beats the compact models clearly, and int8
    # loses at most a point against its float32 original.
    assert by["oracle"].accuracy > by["compact_b"].accuracy + 0.03
    assert abs(by["oracle_int8"].accuracy - by["oracle"].accuracy) < 0.01
    assert min(v.accuracy for v in catalog) > 0.5  # 120 classes: chance is 0.008
    # int8 holds about a quarter of the float32 bytes and runs cheaper; the compacts cost far less.
    assert by["oracle_int8"].memory_bytes < 0.5 * by["oracle"].memory_bytes
    assert by["oracle_int8"].cost_s() < by["oracle"].cost_s()
    assert max(by["compact_a"].cost_s(), by["compact_b"].cost_s()) < by["oracle_int8"].cost_s()
    # the held-out renders are not the training renders (seed 1)
    xs, ys = held_out()
    train_x, _ = render_dataset(2, seed=1)
    assert len(ys) == 2400 and not any(np.array_equal(train_x[0], x) for x in xs[ys == 0])
    # the accuracy recorded is what the model gives on that set
    m = variant_models(model_cache_dir)["compact_a"]
    from vidnexus.training.glyphs import predict
    assert float((predict(m, xs) == ys).mean()) == pytest.approx(by["compact_a"].accuracy, abs=1e-4)


def test_the_catalog_is_measured_once_per_machine(catalog, model_cache_dir):
    path = next(model_cache_dir.glob(f"variants-v1-{TASK}*.json"))
    saved = json.loads(path.read_text())
    assert [v["name"] for v in saved["variants"]] == list(VARIANTS) and saved["held_out"] == 2400
    assert load_or_measure(model_cache_dir) == catalog


def test_models_variants_lists_the_catalog_and_picks_within_the_budget(catalog, model_cache_dir, monkeypatch):
    from vidnexus.cli import app

    monkeypatch.setenv("VNX_DATA_DIR", str(model_cache_dir.parent))
    need = 400 * next(v for v in catalog if v.name == "oracle_int8").cost_s()
    r = CliRunner().invoke(app, ["models", "variants", TASK, "--rate", "300", "--rate", "100",
                                 "--device-budget", f"{need / 2:.6f}"], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert all(name in r.output for name in VARIANTS)
    rows = [line for line in r.output.splitlines() if line.startswith("│ s")]
    assert len(rows) == 2 and all("compact_b" in row and "yes" in row for row in rows)
    r = CliRunner().invoke(app, ["models", "variants", "nope"])
    assert r.exit_code != 0 and "no variant catalog" in str(r.exception)
