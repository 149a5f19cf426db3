"""Every contract that crosses processes: round trips, and clear errors for malformed or unknown
records (consumers turn them into dead letters)."""

import msgpack
import numpy as np
import pytest

from vidnexus.contracts.codec import pack
from vidnexus.contracts.frames import Frame, decode_frame, encode_frame
from vidnexus.contracts.plans import EpochPlan, LatencySplit, decode_plan, encode_plan
from vidnexus.contracts.profile import Profile
from vidnexus.contracts.replies import DROP_REASONS, Reply
from vidnexus.contracts.reports import AppReport, FanOut, decode_report, encode_report
from vidnexus.contracts.requests import InferRequest, decode_reply, decode_request, encode_reply, encode_request
from vidnexus.contracts.rows import decode_rows, encode_rows
from vidnexus.contracts.schema import Column, TableSchema
from vidnexus.contracts.sessions import SessionKey
from vidnexus.contracts.stats import ExecutorStats, SessionStats, decode_stats, encode_stats
from vidnexus.contracts.topics import Topics
from vidnexus.errors import CodecError, ConfigError


def test_request_and_reply_round_trip():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.ones((4,), np.uint8)
    r = decode_request(encode_request(InferRequest("a", "m-5ms", 12.5, "t", (x, y), "app", "cam", 3)))
    assert (r.request_id, r.session_id, r.deadline_wall, r.reply_to, r.app, r.stream, r.frame_no) == (
        "a", "m-5ms", 12.5, "t", "app", "cam", 3)
    assert len(r.inputs) == 2 and np.array_equal(r.inputs[0], x) and np.array_equal(r.inputs[1], y)
    assert r.inputs[1].dtype == np.uint8
    reps = [Reply.dropped("early_drop"), Reply.answer([1, 2], batch=4)]
    assert decode_reply(encode_reply("a", "s", reps)) == ("a", "s", reps)


def test_version_2_requests_and_replies_are_still_read():
    """An executor or worker of the previous release, during a rolling upgrade."""
    x = np.arange(3, dtype=np.float32)
    r = decode_request(pack("req", 2, ["a", "m-5ms", 12.5, "t", ["<f4", [3], x.tobytes()], "app", "cam", 3]))
    assert len(r.inputs) == 1 and np.array_equal(r.inputs[0], x) and r.frame_no == 3
    assert decode_reply(pack("rep", 2, ["a", "s", True, [1.0], None, 0.01, 2])) == (
        "a", "s", [Reply(True, [1.0], None, 0.01, 2)])


def test_a_request_without_inputs_is_malformed():
    with pytest.raises(CodecError, match="no inputs"):
        decode_request(pack("req", 3, ["a", "s", 1.0, "t", [], "", "", 0]))


def test_frame_and_rows_round_trip():
    f = Frame("cam", 7, 1.5, 2.0, 2.1, 4, 2, "raw", bytes(24), {"apps": "hud"})
    assert decode_frame(encode_frame(f)) == f
    t = TableSchema("t", (Column("a", "UInt8"), Column("s", "String")), order_by=("a",))
    rows, schemas = decode_rows(encode_rows({"t": [(1, "x"), (2, "y")], "empty": []}, {"t": t}))
    assert rows == {"t": [(1, "x"), (2, "y")]} and schemas == {"t": t}


def test_control_documents_round_trip():
    prof = Profile.linear(0.002, 0.01, 8)
    st = ExecutorStats("e1", "cpu", 3.0, {"m-10ms": 4}, ("m-10ms",), {"m": prof},
                       (SessionStats("m-10ms", "m", 10.0, "plan", arrivals=5, drops={"deadline": 1},
                                     latency_p50_ms=float("nan")),))
    back = decode_stats(encode_stats(st))
    assert back.sessions[0].latency_p50_ms != back.sessions[0].latency_p50_ms  # NaN survives as NaN
    assert back.profiles == st.profiles and back.sessions[0].drops == {"deadline": 1}
    rep = AppReport("a", "w", 100.0, ("d", "c"), (("frames", "d"), ("d", "c")),
                    FanOut(10, {"d": 10, "c": 30}, {"d": 9}, {("frames", "d"): 10, ("d", "c"): 30}), 5.0)
    assert decode_report(encode_report(rep)) == rep
    plan = EpochPlan(2, 9, 1.0, {"e1": {"d-50ms": 8}}, {"d-50ms": {"e1": 12.5}}, (("x-5ms", "overloaded"),), 1, 1,
                     {"d-50ms": 12.5}, {"a": LatencySplit(True, "", {"d": 50.0}, {"d": 50.0}, {"frames->d": 1.0}, 1.2)},
                     ("e1",), ("old-1ms",))
    assert decode_plan(encode_plan(plan)) == plan


@pytest.mark.parametrize("decode, raw, match", [
    (decode_frame, b"\x00zz", "malformed frame"),
    (decode_frame, pack("frame", 1, [1]), "version 1"),
    (decode_request, msgpack.packb([2, "rep", 1]), "kind 'rep'"),
    (decode_request, msgpack.packb([1, "req", 1]), "version 1 .this build reads 3 and 2"),
    (decode_request, pack("req", 2, ["a", "s", "not a time", "t", ["<f4", [1], b"\0\0\0\0"], "", "", 0]), "malformed req"),
    (decode_rows, pack("rows", 2, [{"t": [["t", [["a", "UInt8"]], ["a"], "MergeTree()", None], [[1, 2]]]}]), "values"),
    (decode_plan, b'{"v": 1, "kind": "stats"}', "kind 'stats'"),
    (decode_plan, b'{"v": 9, "kind": "plan"}', "version 9"),
    (decode_stats, b"not json", "malformed stats"),
    (decode_report, b'{"v": 1, "kind": "app", "app": "a"}', "malformed app report"),
])
def test_malformed_records_are_clear_errors(decode, raw, match):
    with pytest.raises(CodecError, match=match):
        decode(raw)


def test_session_keys_have_one_string_form():
    k = SessionKey("mobilenet_v3_small", 120.0)
    assert str(k) == "mobilenet_v3_small-120ms" and SessionKey.parse(str(k)) == k
    assert SessionKey.parse("hud_digits-600000ms") == SessionKey("hud_digits", 600000)
    assert SessionKey("m", 33.33333) == SessionKey.parse(str(SessionKey("m", 33.33333)))
    assert SessionKey.from_arg("resnet18:100") == SessionKey("resnet18", 100)
    for bad in ("digits", "a-fastms", "m-0ms", "m-infms", "-5ms"):
        with pytest.raises(ConfigError):
            SessionKey.parse(bad)
    with pytest.raises(ConfigError, match="MODEL:SLO_MS"):
        SessionKey.from_arg("resnet18")


def test_replies_carry_a_known_reason_exactly_when_dropped():
    assert set(DROP_REASONS) >= {"early_drop", "deadline", "overload", "error", "late", "timeout", "retired"}
    with pytest.raises(ValueError):
        Reply(True, 1, "deadline")
    with pytest.raises(ValueError):
        Reply(False)
    with pytest.raises(ValueError, match="unknown drop reason"):
        Reply(False, reason="lost")


def test_one_naming_rule_for_topics_and_dead_letters():
    t = Topics("p")
    assert (t.frames, t.rows, t.stats, t.apps, t.control) == ("p.frames", "p.rows", "p.stats", "p.apps", "p.control")
    assert t.requests(SessionKey("m", 5)) == "p.req.m-5ms" and t.replies("w1") == "p.replies.w1"
    assert {t.dead_letter(s) for s in ("frames", "requests", "rows")} == {"p.dead.frames", "p.dead.requests",
                                                                          "p.dead.rows"}
    assert t.group("executor") == "p-executor"


def test_column_defaults_travel_with_the_schema():
    """vnx_frames' version has a DEFAULT the sink must create; columns without one keep the old
    two-element form, so rows messages written before defaults existed still decode."""
    from vidnexus.operators.engine import FRAMES_TABLE

    rows, schemas = decode_rows(encode_rows({"vnx_frames": [tuple(range(10))]}, {"vnx_frames": FRAMES_TABLE}))
    assert schemas["vnx_frames"] == FRAMES_TABLE and FRAMES_TABLE.columns[-1].default
    old = pack("rows", 2, [{"t": [["t", [["a", "UInt8"]], ["a"], "MergeTree()", None], [[1]]]}])
    assert decode_rows(old)[1]["t"].columns == (Column("a", "UInt8"),)
