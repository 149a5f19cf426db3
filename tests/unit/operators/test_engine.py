"""The chain engine on scripted frames and a scripted DNN backend (no executor, no sleeps).

Engines and frames share a FakeClock: time passes only where a test moves it, so SLOs of a few ms are
never missed by a slow machine, and ``late`` drops and latencies are exact."""

import asyncio
from collections import Counter

import pytest

from vidnexus.operators.chain import App
from vidnexus.operators.engine import FRAMES_TABLE, ChainEngine, KeyedDispatcher, Reply
from vidnexus.testing import FakeClock, frame_factory

CLOCK = FakeClock()  # never advanced: the tests that need time to pass bring their own


def engine(app, backend, clock=CLOCK):
    return ChainEngine(app, backend, clock=clock)


def frame(stream, frame_no, clock=CLOCK, **kw):
    """A frame ingested now on ``clock``."""
    return frame_factory(stream, frame_no, clock=clock, **kw)


class ScriptedBackend:
    """Detector: one box per 10 pixels of width-index; classifiers: echo. Drops inputs in ``drop``."""

    def __init__(self, drop=()):
        self.calls = Counter()
        self.drop = set(drop)

    async def infer(self, model, inputs, deadline_wall):
        self.calls[model.name] += len(inputs)
        out = []
        for x in inputs:
            if isinstance(x, int) and (model.name, x) in self.drop:
                out.append(Reply(False, reason="early_drop"))
            elif model.name == "det":
                out.append(Reply(True, [{"cls": "car" if k % 2 == 0 else "person", "k": k} for k in range(x)]))
            else:
                out.append(Reply(True, f"{model.name}:{x['k']}"))
        return out


def two_stage_app():
    app = App("two", slo_ms=1000)
    app.model("det")
    app.model("car")
    app.model("face")
    app.table("objs", {"cls": "String", "label": "String"})
    app.chain(lambda s: (s.infer("det", input=lambda f: f.frame_no)
                         .flat_map(lambda r: r.output)
                         .route(lambda b: b["cls"],
                                car=lambda b: b.infer("car", merge=lambda v, o: {"cls": "car", "label": o}),
                                person=lambda b: b.infer("face", merge=lambda v, o: {"cls": "person", "label": o}))
                         .sink("objs")))
    return app


def run(engine, frames):
    async def go():
        return [await engine.run(f) for f in frames]
    return asyncio.run(go())


def test_rows_identity_and_fanout():
    app = two_stage_app()
    eng = engine(app, ScriptedBackend())
    outs = run(eng, [frame("c1", n) for n in (0, 1, 4)])
    assert [o.status for o in outs] == ["ok", "ok", "ok"]
    assert outs[0].rows == {}                                    # no boxes: accounted, no rows
    rows = outs[2].rows["objs"]
    # identity (stream, frame_no, row_idx), then the columns; branches in declaration order
    assert rows == [("c1", 4, 0, "car", "car:0"), ("c1", 4, 1, "car", "car:2"),
                    ("c1", 4, 2, "person", "face:1"), ("c1", 4, 3, "person", "face:3")]
    fo = eng.fanout
    assert fo.frames == 3 and fo.calls["det"] == 3
    assert fo.gamma("frames", "det") == 1.0
    assert fo.gamma("det", "car") == pytest.approx(3 / 3)        # 0 + 1 + 2 cars over 3 detector calls
    assert fo.gamma("det", "face") == pytest.approx(2 / 3)       # 0 + 0 + 2 persons


def test_dropped_requests_are_accounted_per_frame():
    app = two_stage_app()
    eng = engine(app, ScriptedBackend(drop={("det", 2)}))
    o = run(eng, [frame("c1", 2)])[0]
    assert o.status == "dropped" and o.reasons == {"early_drop": 1} and o.rows == {}
    # One crop of four dropped: the frame is partial, three rows written.
    class DropFirstCar(ScriptedBackend):
        async def infer(self, model, inputs, deadline_wall):
            out = await super().infer(model, inputs, deadline_wall)
            if model.name == "car":
                out[0] = Reply(False, reason="deadline")
            return out

    o = run(engine(app, DropFirstCar()), [frame("c1", 4)])[0]
    assert o.status == "partial" and o.reasons == {"deadline": 1} and len(o.rows["objs"]) == 3


def test_a_frame_already_past_its_deadline_is_dropped_late_without_dnn_requests():
    clock = FakeClock()
    backend = ScriptedBackend()
    eng = engine(two_stage_app(), backend, clock)  # SLO 1 s
    stale = frame("c1", 3, clock)
    clock.advance(1.5)
    fresh = frame("c1", 4, clock)
    o_stale, o_fresh = run(eng, [stale, fresh])
    assert o_stale.status == "dropped" and o_stale.reasons == {"late": 1} and o_stale.rows == {}
    assert o_stale.latency_ms == pytest.approx(1500)
    assert o_fresh.status == "ok" and len(o_fresh.rows["objs"]) == 4
    assert backend.calls["det"] == 1  # only the fresh frame reached the backend


def test_requests_whose_deadline_passed_in_the_cpu_steps_are_not_sent():
    clock = FakeClock()
    app = App("slow", slo_ms=50)
    app.model("m")
    app.table("t", {"v": "String"})
    app.chain(lambda s: s.map(lambda f: clock.advance(0.08) or f.frame_no).infer("m", merge=lambda v, o: {"v": o})
              .sink("t"))                                   # the CPU step takes 80 ms
    backend = ScriptedBackend()
    o = run(engine(app, backend, clock), [frame("c1", 1, clock)])[0]
    assert o.status == "dropped" and o.reasons == {"late": 1} and o.latency_ms == pytest.approx(80)
    assert backend.calls["m"] == 0


def test_an_app_without_dnn_steps_still_writes_late_rows():
    clock = FakeClock()
    app = App("cpu", slo_ms=10)
    app.table("t", {"v": "Int64"})
    app.chain(lambda s: s.map(lambda f: {"v": f.frame_no}).sink("t"))
    late = frame("c1", 7, clock)
    clock.advance(5)
    o = run(engine(app, ScriptedBackend(), clock), [late])[0]
    assert o.status == "ok" and o.rows["t"] == [("c1", 7, 0, 7)] and o.latency_ms == pytest.approx(5000)


def test_user_step_errors_become_drops_that_name_the_step():
    app = App("e", slo_ms=100)
    app.table("t", {"v": "Int64"})
    app.chain(lambda s: s.map(lambda f: 10 // (f.frame_no - 1)).filter(lambda v: v if v < 0 else True)
              .map(lambda v: {"v": v}).sink("t"))
    outs = run(engine(app, ScriptedBackend()), [frame("c", n) for n in (0, 1, 3)])
    assert outs[0].status == "error" and outs[0].reasons == {"error:filter[1]": 1}   # -10 is not a bool
    assert outs[1].status == "error" and outs[1].reasons == {"error:map[0]": 1}      # ZeroDivisionError
    assert outs[2].status == "ok" and outs[2].rows == {"t": [("c", 3, 0, 5)]}


def test_sink_refuses_elements_without_the_columns():
    app = App("s", slo_ms=100)
    app.table("t", {"a": "Int64", "b": "Int64"})
    app.chain(lambda s: s.map(lambda f: {"a": 1}).sink("t"))
    o = run(engine(app, ScriptedBackend()), [frame("c", 0)])[0]
    assert o.status == "error" and o.reasons == {"error:sink[1]": 1}


def test_many_inputs_per_element_are_requested_together_in_order():
    app = App("m", slo_ms=100)
    app.model("cls")
    app.table("t", {"labels": "Array(String)"})
    app.chain(lambda s: s.infer("cls", input=lambda f: [{"k": k} for k in range(3)], many=True,
                                merge=lambda f, outs: {"labels": outs}).sink("t"))
    back = ScriptedBackend()
    eng = engine(app, back)
    o = run(eng, [frame("c", 7)])[0]
    assert o.rows["t"] == [("c", 7, 0, ["cls:0", "cls:1", "cls:2"])]
    assert eng.fanout.gamma("frames", "cls") == 3.0


def test_an_element_with_no_inputs_goes_on_with_empty_outputs_whether_or_not_others_had_some():
    # A frame whose elements have nothing to ask (no person in view) gets what an element with no
    # inputs gets beside others that have some: Inferred(value, []), not its bare value.
    from vidnexus.operators.chain import Inferred

    app = App("e", slo_ms=100)
    app.model("cls")
    app.table("t", {"n": "UInt8", "labels": "Array(String)"})

    def row(r: Inferred) -> dict:
        assert isinstance(r, Inferred), r
        return {"n": len(r.output), "labels": list(r.output)}

    app.chain(lambda s: s.infer("cls", input=lambda f: [{"k": k} for k in range(f.frame_no % 3)], many=True)
              .map(row).sink("t"))
    outs = run(engine(app, ScriptedBackend()), [frame("c", n) for n in range(3)])
    assert [o.status for o in outs] == ["ok"] * 3
    assert [o.rows["t"][0][3:] for o in outs] == [(0, []), (1, ["cls:0"]), (2, ["cls:0", "cls:1"])]


def test_windows_count_per_stream_and_key_then_flush():
    app2 = App("w2", slo_ms=100)
    app2.table("per_10s", {"cls": "String", "n": "UInt32"})
    app2.chain(lambda s: (s.flat_map(lambda f: [("car", f.pts)] * (f.frame_no % 3))
                          .window(10.0, key=lambda e: e[0], agg=lambda k, xs: {"cls": k, "n": len(xs)},
                                  time=lambda e: e[1])
                          .sink("per_10s")))
    eng = engine(app2, ScriptedBackend())
    frames = [frame("a", n, fps=1.0) for n in range(25)]  # pts = n seconds
    outs = run(eng, frames)
    emitted = [r for o in outs for r in o.rows.get("per_10s", [])]
    # window [0,10): frames 0..9 give 0+1+2+0+1+2+0+1+2+0 = 9 cars; [10,20): 10..19 → 1+2+0+1+2+0+1+2+0+1 = 10
    assert [(r[0], r[1], r[3], r[4]) for r in emitted] == [("a", 0, "car", 9), ("a", 10000, "car", 10)]
    rest = asyncio.run(eng.flush())
    assert [(r[1], r[4]) for o in rest for r in o.rows["per_10s"]] == [(20000, 2 + 0 + 1 + 2 + 0)]


def test_keyed_dispatcher_keeps_per_key_order_and_overlaps_keys():
    log = []

    async def job(key, i, gate):
        log.append(("start", key, i))
        await gate.wait()
        log.append(("end", key, i))

    async def go():
        d = KeyedDispatcher(limit=8)
        gates = {k: asyncio.Event() for k in ("a", "b")}
        for i in range(2):
            for k in ("a", "b"):
                await d.submit(k, lambda k=k, i=i: job(k, i, gates[k]))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        started = [e for e in log if e[0] == "start"]
        in_flight = d.in_flight
        gates["a"].set()
        gates["b"].set()
        await d.drain()
        return started, in_flight, d.in_flight

    started, in_flight, after = asyncio.run(go())
    assert (in_flight, after) == (4, 0)  # the watchdog reads it: queued and running count until done
    assert started == [("start", "a", 0), ("start", "b", 0)]   # both keys run, second of each waits
    for k in ("a", "b"):
        assert log.index(("end", k, 0)) < log.index(("start", k, 1))


def test_remote_requests_nobody_answers_end_as_timeout_drops():
    from vidnexus.config import Settings
    from vidnexus.connectors.memory_bus import MemoryBus
    from vidnexus.gpu_executor.client import ExecutorClient
    from vidnexus.operators.infer import RemoteBackend

    app = App("t", slo_ms=50)
    app.model("m")
    app.table("t", {"x": "Int64"})
    app.chain(lambda s: s.infer("m", input=lambda f: __import__("numpy").zeros(2, "float32"),
                                merge=lambda f, o: {"x": 1}).sink("t"))
    clock = FakeClock()
    client = ExecutorClient(MemoryBus(clock=clock), Settings(topic_prefix="to"), clock=clock)
    try:
        backend = RemoteBackend(app, client, {"m": 50.0}, grace_s=0.05)   # no executor serves m-50ms

        async def go():
            task = asyncio.create_task(engine(app, backend, clock).run(frame("c", 1, clock)))
            for _ in range(100):                # let the engine send its request; no time passes
                if client.outstanding:
                    break
                await asyncio.sleep(0)
            assert client.outstanding == 1 and not task.done()
            clock.advance(0.2)                  # past the deadline (50 ms) and the grace (50 ms)
            return await task

        o = asyncio.run(go())
        assert o.status == "dropped" and o.reasons == {"timeout": 1} and o.latency_ms == pytest.approx(200)
        assert client.outstanding == 0                                     # nothing left waiting
    finally:
        client.close()


def test_the_frames_row_carries_the_outcome_version_at_the_engine_clock():
    """A replay's row must be able to lose to the answered run: the version is the outcome's rank
    and the engine clock's wall time when the outcome was decided (frame_version)."""
    from vidnexus.operators.frame_version import frame_version

    clock = FakeClock(wall_start=1_800_000_000.0)
    eng = engine(two_stage_app(), ScriptedBackend(), clock)
    stale = frame("c1", 3, clock)
    clock.advance(1.5)  # past the 1 s SLO: the replay case, dropped late
    o_stale, o_fresh = run(eng, [stale, frame("c1", 4, clock)])
    assert o_stale.decided_wall == o_fresh.decided_wall == 1_800_000_001.5
    row_stale, row_fresh = o_stale.frames_row("two"), o_fresh.frames_row("two")
    assert row_stale[-1] == frame_version("dropped", 1_800_000_001.5)
    assert row_fresh[-1] == frame_version("ok", 1_800_000_001.5)
    assert len(row_fresh) == len(FRAMES_TABLE.columns) and FRAMES_TABLE.column_names[-1] == "version"
    # The answered run, written before the replay, still wins over the later late drop.
    assert o_fresh.frames_row("two")[-1] > frame_version("dropped", 1_900_000_000.0)


def test_a_flood_of_elements_is_bounded_and_accounted_as_such():
    """A step gone wrong (thousands of crops per frame) is cut at max_fanout, the rest counted as
    ``flood:<step>``; frames that stay within the bound are untouched (issue 19 item 4)."""
    app = App("f", slo_ms=1000, max_fanout=100)
    app.model("cls")
    app.table("t", {"k": "UInt32"})
    app.chain(lambda s: (s.flat_map(lambda f: [{"k": k} for k in range(5000 if f.frame_no == 0 else 3)])
                         .infer("cls", merge=lambda v, o: v).sink("t")))
    back = ScriptedBackend()
    flood, calm = run(engine(app, back), [frame("c", 0), frame("c", 1)])
    assert flood.reasons == {"flood:flat_map[0]": 4900} and flood.status == "partial"
    assert [r[3] for r in flood.rows["t"]] == list(range(100))
    assert calm.status == "ok" and len(calm.rows["t"]) == 3 and not calm.reasons
    assert back.calls["cls"] == 103


def test_a_flood_of_dnn_inputs_is_bounded_per_frame():
    app = App("g", slo_ms=1000, max_fanout=50)
    app.model("cls")
    app.table("t", {"n": "UInt32"})
    app.chain(lambda s: s.infer("cls", input=lambda f: [{"k": k} for k in range(80)], many=True,
                                merge=lambda f, outs: {"n": len(outs)}).sink("t"))
    back = ScriptedBackend()
    o = run(engine(app, back), [frame("c", 0)])[0]
    assert back.calls["cls"] == 50 and o.reasons == {"flood:infer[0]": 30}
    assert o.rows["t"] == [("c", 0, 0, 50)] and o.status == "partial"
    with pytest.raises(Exception, match="max_fanout"):
        App("h", slo_ms=10, max_fanout=0)
