"""MCDNN's variant choice under budgets (control.variants): shares in proportion to rate, the most
accurate variant that fits, load costs weighed before an upgrade, the cheapest when nothing fits."""

import math

import pytest

from vidnexus.control.variants import Budgets, TaskSession, Variant, choose_variants, shares

CAT = [Variant("oracle", "glyph", 0.97, 0.020, 400_000_000, load_s=2.0),
       Variant("compact", "glyph", 0.91, 0.004, 50_000_000, load_s=0.2),
       Variant("compact-int8", "glyph", 0.89, 0.002, 15_000_000, load_s=0.1)]


def test_shares_follow_request_rates():
    s = shares([TaskSession("a", "glyph", 30), TaskSession("b", "glyph", 10)], Budgets(1.0, 400.0))
    assert s["a"] == pytest.approx((0.75, 300.0)) and s["b"] == pytest.approx((0.25, 100.0))
    # A session with no requests yet still gets room for the least positive rate present.
    s = shares([TaskSession("a", "glyph", 10), TaskSession("idle", "glyph", 0)], Budgets(1.0))
    assert s["idle"][0] == pytest.approx(0.5) and s["a"][1] == math.inf


def test_accuracy_falls_as_the_budget_tightens():
    sessions = [TaskSession("cam", "glyph", 20.0)]
    picked = [choose_variants({"glyph": CAT}, sessions, Budgets(device_s_per_s=d))[0] for d in (1.0, 0.4, 0.1, 0.04, 0.01)]
    assert [c.variant for c in picked] == ["oracle", "oracle", "compact", "compact-int8", "compact-int8"]
    assert [c.fits for c in picked] == [True, True, True, True, False]  # 20 × 2 ms = 0.04 > 0.01: over, cheapest
    mem = choose_variants({"glyph": CAT}, sessions, Budgets(memory_bytes=60_000_000))[0]
    assert mem.variant == "compact"  # the oracle's 400 MB does not fit, whatever the device time


def test_an_upgrade_waits_until_loading_pays_for_itself_and_a_downgrade_does_not_wait():
    sessions = [TaskSession("cam", "glyph", 20.0)]
    # 0.5 device-s/s: the oracle fits; loading it (2 s) is more than 10% of 0.5 × 30 s = 1.5 s: stay.
    stay = choose_variants({"glyph": CAT}, sessions, Budgets(0.5), previous={"cam": "compact"})[0]
    assert (stay.variant, stay.switched) == ("compact", False)
    # A longer epoch makes it worth it.
    up = choose_variants({"glyph": CAT}, sessions, Budgets(0.5), previous={"cam": "compact"}, epoch_s=60)[0]
    assert (up.variant, up.switched) == ("oracle", True)
    # Load doubles the rate: the oracle no longer fits (40 × 20 ms = 0.8 > 0.5): down at once.
    down = choose_variants({"glyph": CAT}, [TaskSession("cam", "glyph", 40.0)], Budgets(0.5),
                           previous={"cam": "oracle"})[0]
    assert (down.variant, down.switched) == ("compact", True)


def test_bad_catalogs_and_variants_are_refused():
    with pytest.raises(ValueError, match="no variants for task 'ocr'"):
        choose_variants({"glyph": CAT}, [TaskSession("x", "ocr", 1.0)], Budgets())
    with pytest.raises(ValueError, match="accuracy"):
        Variant("v", "t", 1.5, 0.01, 0)
    with pytest.raises(ValueError, match="cost per request"):
        Variant("v", "t", 0.5, 0.0, 0)


def test_a_session_whose_streams_ended_keeps_its_variant():
    """No requests: an upgrade would load a model to serve nothing (before, the idle session's
    whole share made the oracle fit, and the executor loaded it at every stream's end)."""
    idle = [TaskSession("cam", "glyph", 0.0)]
    kept = choose_variants({"glyph": CAT}, idle, Budgets(1.0), previous={"cam": "compact-int8"}, epoch_s=600)[0]
    assert (kept.variant, kept.switched, kept.fits) == ("compact-int8", False, True)
    # With no variant running yet, an idle session gets the best that fits (a plan hosts it before frames come).
    assert choose_variants({"glyph": CAT}, idle, Budgets(1.0))[0].variant == "oracle"
