"""The built-in apps declare their models (vidnexus.apps.model_catalog); the executor's repository
knows them only when its builder passes them, and the zoo holds architectures only."""

from vidnexus.apps import model_catalog
from vidnexus.gpu_executor.repository import ModelRepository
from vidnexus.gpu_executor.zoo import ZOO

APP_MODELS = {"hud_digits": ((1, 28, 28), "classify"), "car_colours": ((3, 32, 32), "classify"),
              "dance_pose": ((3, 64, 64), "embed"), "glyph_compact": ((3, 32, 32), "embed"),
              "hud_text": ((3, 48, 320), "text"), "pose_landmarks": ((256, 256, 3), "pose"),
              **{f"game_icons_g{g}": ((3, 32, 32), "classify") for g in range(20)},
              **{f"glyph120_{v}": ((3, 32, 32), "classify") for v in ("oracle", "oracle_int8", "compact_b", "compact_a")}}


def test_the_apps_declare_the_models_their_chains_call():
    from vidnexus.apps import APP_REFS, load_app

    catalog = {e.name: (e.input_shape, e.task) for e in model_catalog()}
    assert catalog == APP_MODELS
    called = {v for ref in APP_REFS for m in load_app(ref).models.values() for v in (m.variants or (m.name,))}
    assert called - set(ZOO) == set(APP_MODELS)  # the optional compute-only stages call zoo models


def test_the_zoo_is_architectures_with_random_weights():
    assert not set(ZOO) & set(APP_MODELS)
    from vidnexus.gpu_executor.catalog import RANDOM_WEIGHTS

    assert all(e.weights == RANDOM_WEIGHTS and "recognises nothing" in e.weights for e in ZOO.values())


def test_a_repository_with_the_catalogue_lists_every_model(tmp_path):
    names = {m.name for m in ModelRepository(tmp_path, extra=model_catalog()).list()}
    assert names == set(ZOO) | set(APP_MODELS)
