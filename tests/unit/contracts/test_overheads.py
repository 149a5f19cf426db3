"""What a worker measures outside the executor travels in its app report, and what the split
reserved travels in the plan; documents of older workers and schedulers still decode."""

import json

from vidnexus.contracts.plans import EpochPlan, LatencySplit, decode_plan, encode_plan
from vidnexus.contracts.reports import AppReport, FanOut, Overheads, decode_report, encode_report


def report(**kw):
    return AppReport("traffic", "w1", 300.0, ("det", "cls"), (("frames", "det"), ("det", "cls")),
                     FanOut(10, {"det": 10, "cls": 40}), 2.0, **kw)


def test_a_report_carries_the_workers_overheads():
    oh = Overheads(hop_ms={"det": 6.5, "cls": 4.0}, cpu_ms={"frames": 1.25, "det": 3.0}, publish_ms=0.75)
    back = decode_report(encode_report(report(overheads=oh)))
    assert back.overheads == oh
    assert (back.overheads.reserve_ms("det"), back.overheads.reserve_ms("cls"), back.overheads.reserve_ms("frames")) \
        == (9.5, 4.0, 2.0)


def test_an_older_workers_report_without_overheads_decodes_with_none_measured():
    doc = json.loads(encode_report(report()))
    del doc["overheads"]
    back = decode_report(json.dumps(doc).encode())
    assert back == report() and back.overheads == Overheads() and back.overheads.reserve_ms("det") == 0.0


def test_several_workers_overheads_take_the_worst_per_key():
    a = Overheads({"det": 5.0}, {"det": 1.0}, 0.5)
    b = Overheads({"det": 3.0, "cls": 2.0}, {"frames": 4.0}, 0.25)
    assert a.worst(b) == Overheads({"det": 5.0, "cls": 2.0}, {"det": 1.0, "frames": 4.0}, 0.5)


def test_the_plan_says_what_the_split_reserved_and_an_older_plan_decodes_without():
    sp = LatencySplit(True, "", {"det": 120.0, "cls": 150.0}, reserve_ms={"det": 14.0, "cls": 12.0, "frames": 4.0})
    plan = EpochPlan(1, 2, 0.0, splits={"traffic": sp})
    assert decode_plan(encode_plan(plan)).splits["traffic"].reserve_ms == {"det": 14.0, "cls": 12.0, "frames": 4.0}
    doc = json.loads(encode_plan(plan))
    del doc["splits"]["traffic"]["reserve_ms"]
    assert decode_plan(json.dumps(doc).encode()).splits["traffic"].reserve_ms == {}
