"""WEG (Algorithm 5.1) as a pure state machine, driven by scripted label sequences."""

import pytest

from vidnexus.specialization.weg import OTHER, AccuracyModel, Weg, WegParams, appendix_c, dom_classes, support_k

# Table C.1 of the reference: (N, a*, n, p, w, k) → (p_in, p_out)
TABLE_C1 = [
    ((1000, .68, 5, .9, 30, 2), (0.896, 6.52e-5)),
    ((1000, .68, 10, .9, 30, 2), (0.558, 6.53e-5)),
    ((1000, .68, 10, .9, 60, 2), (0.891, 2.64e-4)),
    ((1000, .68, 10, .7, 60, 2), (0.789, 4.80e-4)),
    ((1000, .68, 10, .7, 90, 2), (0.933, 1.08e-3)),
    ((205, .58, 10, .9, 90, 2), (0.959, 0.019)),
    ((205, .58, 10, .9, 90, 3), (0.872, 1.31e-3)),
    ((205, .58, 0, None, 90, 3), (None, 9.29e-3)),
]


@pytest.mark.parametrize("args, want", TABLE_C1)
def test_appendix_c_table(args, want):
    p_in, p_out = appendix_c(*args)
    if want[0] is None:
        assert p_in is None
    else:
        assert p_in == pytest.approx(want[0], abs=1e-2)
    assert p_out == pytest.approx(want[1], abs=1e-2)


def test_k_rule_and_dominant_classes():
    assert [support_k(w) for w in (30, 89, 90, 200)] == [2, 2, 3, 3]
    window = ["a"] * 5 + ["b"] * 2 + ["c"] + list("defghijklmnopqrstuvw")
    assert len(window) < 90 and dom_classes(window) == ("a", "b")
    big = ["a"] * 15 + ["b"] * 6 + ["c"] * 3 + ["d"] * 2 + [f"u{i}" for i in range(70)]
    assert len(big) >= 90 and dom_classes(big) == ("a", "b", "c")   # w ≥ 90 → k = 3: d (2×) is out
    assert dom_classes(["x", OTHER, OTHER], k=2) == ()   # "other" is never a dominant class


def test_accuracy_model_interpolates_and_applies_eq_5_1():
    m = AccuracyModel({2: (0.98, 0.01, 0.95), 10: (0.90, 0.05, 0.85)})
    assert m.terms(6) == pytest.approx((0.94, 0.03, 0.90))
    assert m.terms(1) == m.terms(2) and m.terms(20) == m.terms(10)
    # â = p·a_in + p·e·a* + (1−p)·a_out·a*
    assert m.estimate(2, 0.9, 0.7) == pytest.approx(0.9 * 0.98 + 0.9 * 0.01 * 0.7 + 0.1 * 0.95 * 0.7)


GOOD = AccuracyModel({1: (0.97, 0.01, 0.95), 20: (0.9, 0.05, 0.9)})


def make(**kw):
    params = WegParams(**{"w_min": 10, **kw})
    return Weg(params, [("small", GOOD)], oracle_accuracy=0.7, seed=1)


def feed_window(weg, labels):
    for y in labels:
        a = weg.next_action()
        assert a.kind == "oracle"
        weg.observe_oracle(y)


def test_skewed_window_specializes_uniform_window_does_not():
    weg = make()
    feed_window(weg, ["a", "b", "a", "b", "a", "b", "a", "b", "a", "z"])
    a = weg.next_action()
    assert a.kind == "specialize" and a.dominant == ("a", "b") and a.template == "small"
    weg.specialized(a.dominant, a.template)
    assert weg.next_action().kind == "cascade"

    uni = make()
    feed_window(uni, [f"c{i}" for i in range(40)])    # every class once: nothing is dominant
    assert uni.next_action().kind == "oracle" and uni.metrics.specializations == 0


def test_window_slides_until_the_estimate_clears_the_bar():
    """w = |S_j| is fixed when the window opens; each further oracle label pushes the oldest out
    (Algorithm 5.1: "label one more input, append, repeat"), so stale labels do not linger and the
    support k stays the one of w."""
    weg = make()
    labels = ["a", "a"] + [f"x{i}" for i in range(8)]    # a dominant, but only 20% of the window
    feed_window(weg, labels)
    assert weg.next_action().kind == "oracle"           # â < a* + τ_a: keep labelling
    extra = 0
    while weg.next_action().kind == "oracle":
        weg.observe_oracle("a")
        extra += 1
        assert len(weg.window) == 10                    # slides, does not grow
        assert weg.window[-extra:] == ["a"] * extra
        assert "x0" not in weg.window or extra < 3      # the oldest labels left first
    assert 1 <= extra <= 12 and weg.next_action().dominant == ("a",)
    assert weg.metrics.window_sizes == [10]


def test_a_shift_in_the_stream_leaves_no_trace_after_w_labels():
    """After w labels of a new distribution the window holds none of the old one: a class seen in
    the old part is no longer dominant (with a growing window it stayed so for hundreds of labels)."""
    weg = make()
    weg.templates = [("small", AccuracyModel({1: (0.1, 0.0, 0.0)}))]   # never clears the bar: keep labelling
    feed_window(weg, ["old"] * 10)
    for i in range(10):
        weg.observe_oracle(f"new{i % 2}")
    assert "old" not in weg.window and len(weg.window) == 10
    assert set(dom_classes(weg.window)) == {"new0", "new1"}


def test_leaves_when_the_input_drifts_out_of_the_dominant_set():
    weg = make(epsilon=0.0)
    feed_window(weg, ["a", "b"] * 5)
    a = weg.next_action()
    weg.specialized(a.dominant, a.template)
    for _ in range(20):                                 # the compact model answers alone
        act = weg.next_action()
        assert act.kind == "cascade" and not act.audit
        weg.observe_cascade("a", None)
    assert weg.phase == "specialized" and weg.metrics.early_exits == 20
    n = 0
    while weg.phase == "specialized":                   # new classes: "other", the oracle answers
        weg.observe_cascade(OTHER, f"new{n}")
        n += 1
    assert weg.metrics.exits_accuracy == 1 and weg.metrics.epochs == 2 and 1 <= n <= 20
    assert weg.next_action().kind == "oracle" and weg.prev_window


def test_false_positive_audits_end_the_epoch():
    weg = make(epsilon=1.0, min_audits=5)               # audit every early exit
    feed_window(weg, ["a", "b"] * 5)
    a = weg.next_action()
    weg.specialized(a.dominant, a.template)
    for i in range(4):
        assert weg.next_action().audit
        weg.observe_cascade("a", "q")                   # the oracle disagrees every time
        assert weg.phase == "specialized"               # fewer than min_audits expected audits
    weg.observe_cascade("a", "q")
    assert weg.phase == "window" and weg.metrics.exits_fp == 1
    assert weg.metrics.audits == 5 and weg.metrics.audited_accuracy == 0.0


def test_close_dominant_sets_continue_the_epoch():
    weg = make(epsilon=0.0)
    feed_window(weg, ["a", "b"] * 5)
    a = weg.next_action()
    weg.specialized(a.dominant, a.template)
    while weg.phase == "specialized":
        weg.observe_cascade(OTHER, "zz")
    # New window with the same dominant set: merged with the previous epoch's labels.
    feed_window(weg, ["a", "b"] * 5)
    assert len(weg.window) > 10          # S_{j-1} ⊕ S_j
    assert weg.next_action().kind == "specialize"
