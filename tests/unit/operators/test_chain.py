"""The app API: chains are checked when they are built, with errors that name the step."""

from dataclasses import dataclass

import pytest

from vidnexus.errors import ConfigError
from vidnexus.operators.chain import App, DnnGraph, Stream
from vidnexus.apps import load_app
from vidnexus.contracts.frames import Frame


def make_app():
    app = App("t", slo_ms=400)
    app.model("det")
    app.model("car")
    app.model("face")
    app.table("events", {"cls": "String", "n": "UInt32"})
    return app


def test_unknown_model_names_the_step():
    app = make_app()
    with pytest.raises(ConfigError, match=r"infer\[1\] uses model 'ocr'.*app.model\('ocr'\)"):
        app.chain(lambda s: s.map(lambda f: f).infer("ocr").sink("events"))


def test_unknown_table_names_the_step():
    app = make_app()
    with pytest.raises(ConfigError, match=r"sink\[1\] writes table 'evnts'"):
        app.chain(lambda s: s.map(lambda f: {}).sink("evnts"))


def test_chain_must_end_with_a_sink_and_nothing_follows_it():
    app = make_app()
    with pytest.raises(ConfigError, match="must end with .sink"):
        app.chain(lambda s: s.map(lambda f: f))
    with pytest.raises(ConfigError, match=r"no step may follow sink\[1\] events"):
        app.chain(lambda s: s.map(lambda f: {}).sink("events").map(lambda x: x))


def test_branch_must_extend_its_own_stream():
    app = make_app()
    other = Stream(app).map(lambda x: x)
    with pytest.raises(ConfigError, match=r"branch 'car' of route\[0\] must return the stream it was given"):
        app.chain(lambda s: s.route(lambda x: "car", car=lambda b: other).sink("events"))


def test_filter_annotated_with_a_non_bool_return_is_refused():
    app = make_app()

    def has_cars(f: Frame) -> int:
        return 1

    with pytest.raises(ConfigError, match=r"filter\[0\] has_cars must return bool, is annotated int"):
        app.chain(lambda s: s.filter(has_cars).map(lambda f: {}).sink("events"))


def test_step_whose_input_type_does_not_match_the_previous_output():
    app = make_app()

    def size(f: Frame) -> int:
        return f.width

    def label(s: str) -> dict:
        return {"cls": s, "n": 1}

    with pytest.raises(ConfigError, match=r"map\[1\] label takes str but the step before produces int"):
        app.chain(lambda s: s.map(size).map(label).sink("events"))


def test_sink_checks_dataclass_columns_at_load_time():
    app = make_app()

    @dataclass
    class Ev:
        cls: str

    def ev(f: Frame) -> Ev:
        return Ev("car")

    with pytest.raises(ConfigError, match=r"sink\[1\] events needs columns \['n'\], which Ev"):
        app.chain(lambda s: s.map(ev).sink("events"))


def test_identity_columns_are_reserved():
    with pytest.raises(ConfigError, match="identity columns"):
        App("x", 100).table("t", {"stream": "String"})


def test_dnn_graph_of_a_two_stage_query_with_routing():
    app = make_app()
    app.chain(lambda s: (s.infer("det").flat_map(lambda r: r.output)
                         .route(lambda b: b["cls"], car=lambda b: b.infer("car"), person=lambda b: b.infer("face"))
                         .map(lambda r: {"cls": "x", "n": 1}).sink("events")))
    g = app.graph()
    assert g.models == ("det", "car", "face")
    assert set(g.edges) == {("frames", "det"), ("det", "car"), ("det", "face")}
    assert g.depth() == 2
    assert DnnGraph.of(()).depth() == 0


@pytest.mark.parametrize("ref, msg", [
    ("nope", "expected package.module:attribute"),
    ("vidnexus.nothing_here:app", "cannot import"),
    ("vidnexus.apps.hud:reader", "is Model, not a vidnexus App"),
])
def test_load_app_errors(ref, msg):
    with pytest.raises(ConfigError, match=msg):
        load_app(ref)


def test_builtin_app_by_name():
    app = load_app("hud")
    assert app.name == "hud" and app.graph().models == ("hud_digits",)
