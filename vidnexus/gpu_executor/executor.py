"""The in-process executor: a device thread that runs the duty-cycle core, with pre/post-processing
on a worker pool overlapped with device execution.

The same class serves requests arriving over the Bus (``service.py``) and in-process callers
(embedded mode). Every submitted request ends as a :class:`~vidnexus.contracts.replies.Reply`: outputs,
or a drop with its reason (``early_drop``, ``deadline``, ``overload``, ``error``, ``retired``).

A model may be served **layer-wise** (``staged``: a
:class:`~vidnexus.gpu_executor.layerwise_server.LayerwiseServer` per model): its requests join a
running batch at the next layer-group boundary, and the device thread runs one group at a time —
whenever that group ends before the next whole-model real-time batch must start
(:meth:`DutyCycle.rt_deadline`), and whenever no whole-model batch is ready.

A request submitted with no deadline (``deadline=math.inf``: a backfill stream's frame) is
delay-tolerant: it joins its session's background twin (``<session>~bg``), which runs in the device's
slack without delaying a real-time batch (DeepQuery; ``backend.DutyCycle``). Background requests are
counted apart (:meth:`Executor.background_stats`), so the planner sees the real-time load only.

Example:
    >>> from vidnexus.gpu_executor.backend import SessionSpec
    >>> from vidnexus.contracts.profile import Profile
    >>> ex = Executor([SessionSpec("double", "m", slo_s=1.0)],
    ...               runners={"m": lambda xs: [2 * x for x in xs]},
    ...               profiles={"m": Profile.linear(0.001, 0.001, 8)})
    >>> with ex:
    ...     ex.submit("double", 21).result(timeout=5).output
    42
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, ContextManager, Literal, Mapping, Protocol, Sequence

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.contracts.replies import DropReason, Reply
from vidnexus.gpu_executor.backend import Dispatch, DutyCycle, Order, SessionSpec
from vidnexus.gpu_executor.layerwise_server import LayerwiseServer
from vidnexus.gpu_executor.metrics import ExecutorMetrics
from vidnexus.gpu_executor.probing import FIRST_RUN_FACTOR, Prober
from vidnexus.contracts.profile import Profile

__all__ = ["Executor", "GroupRunner", "Runner", "prepare_where", "CALLER_BELOW_S", "BACKGROUND_SUFFIX", "background_of",
           "DeviceSched", "schedule_as_batch"]

DeviceSched = Literal["batch", "normal"]


def schedule_as_batch() -> bool:
    """Give the calling thread Linux's ``SCHED_BATCH`` policy (no privilege needed); whether it took
    (False where the platform has no such policy or refuses it: the thread stays as it was).

    The device thread runs the model back to back (a CPU-bound batch job where the device is a CPU
    core); every other thread of the pipeline (the bus's I/O threads, the broker's, the service's
    consumer, the clients' listeners) is woken to move one request a short step on. A
    ``SCHED_BATCH`` thread does not preempt the thread it wakes next to, and the scheduler treats it
    as CPU-bound, so those short steps run first and the batch runs on between them: the model takes
    the same time per batch, the requests wait less on their way. Its nice value is unchanged.

    Measured behind Kafka on the 2-core VM (issue 18's note of 2026-12-03: two ``vidnexus executor``
    processes behind one broker, 150 KB requests at 140-160 req/s, SLO 50 ms, alternated trace by
    trace, 6 rounds per run, 3 runs with the policy on either executor): on time 0.860 against 0.808,
    0.990 against 0.970 and 0.834 against 0.778 of the requests; in the third run the bus's share of
    the round trip (its traces' mean p99) 14.4 ms against 22.6; the model's time per batch unchanged.
    """
    policy = getattr(os, "SCHED_BATCH", None)
    if policy is None:
        return False
    try:
        os.sched_setscheduler(0, policy, os.sched_param(0))
    except OSError:
        return False
    return True

BACKGROUND_SUFFIX = "~bg"
"""A session's background twin is named ``<session>~bg`` (no session name contains ``~``)."""


def background_of(session_id: str) -> str:
    """The name of ``session_id``'s background twin.

    >>> background_of("resnet18-100ms")
    'resnet18-100ms~bg'
    """
    return session_id + BACKGROUND_SUFFIX

CALLER_BELOW_S = 0.0005
"""A model's inputs that convert faster than this on average are converted in the submitting thread:
handing one to the pool costs about as much (``vidnexus bench preprocess``: a 0.14 ms crop lost 8% on
the pool and gained 13% in the caller; a 1.9 ms JPEG frame gained 40% on the pool)."""


def prepare_where(mean_s: float | None, below_s: float = CALLER_BELOW_S) -> Literal["pool", "caller"]:
    """Where ``preprocess_on="auto"`` converts a model's next input, given its mean conversion time so
    far (None: not measured yet, so the pool, which never holds up the caller).

    >>> prepare_where(None), prepare_where(0.0001), prepare_where(0.002)
    ('pool', 'caller', 'pool')
    """
    return "caller" if mean_s is not None and mean_s < below_s else "pool"

logger = logging.getLogger(__name__)

Runner = Callable[[Sequence[Any]], list[Any]]
"""Runs a batch: one output per input, in order (``TorchRunner`` or any callable)."""


class GroupRunner(Protocol):
    """Runs a prefix-batched dispatch: the shared prefix once, then each model's suffix."""

    def run_parts(self, parts: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Any]]: ...


@dataclass
class _Pending:
    session_id: str
    arrival: float
    deadline: float
    future: Future[Reply]
    input: Any = None
    enqueued: float = 0.0


class Executor:
    """Serve ``sessions`` on one device.

    Args:
        sessions: the (model, SLO) sessions.
        runners: model name → batch runner.
        profiles: model name → ℓ(b) profile (refreshed online from observed batches).
        preprocess: model name → per-request function run on the worker pool before queueing.
        targets: planned batch size per session (default: the local planner).
        clock: time source (tests pass a FakeClock): deadlines, latencies, and every wait of the
            device loop and of :meth:`stop`, so on a FakeClock nothing here sleeps.
        workers: size of the pre/post-processing pool.
        preprocess_on: where ``preprocess`` runs — ``pool`` (the pre/post pool), ``caller`` (the
            thread that calls :meth:`submit`, e.g. the service's consumer: no hand-off per request)
            or ``auto`` (per model, by its measured conversion time: :func:`prepare_where`). Either
            way it overlaps the device thread.
        order: which session's batch runs next (:class:`~vidnexus.gpu_executor.backend.DutyCycle`):
            ``laxity`` (default) or ``round_robin``.
        probe: measure batch sizes past each profile's largest in idle time, while a hosted
            session's SLO could use them (:mod:`~vidnexus.gpu_executor.probing`), on copies of the
            model's last input; the profile gains each size once measured.
        on_profile: called with (model, profile) after a probe extends a profile (the executor role
            caches it, so a restart starts from it).
        staged: model → its layer-wise server, for models served layer group by layer group (no
            runner needed; see the module docstring). Their requests with no deadline join the
            layer-wise batches (no background twin).
        device_sched: the device thread's scheduling policy: ``batch`` (default; Linux's
            ``SCHED_BATCH``, :func:`schedule_as_batch`: the threads that carry requests to and from it
            are not preempted by it) or ``normal`` (the process's own).
    """

    def __init__(
        self,
        sessions: Sequence[SessionSpec],
        runners: Mapping[str, Runner],
        profiles: Mapping[str, Profile],
        *,
        preprocess: Mapping[str, Callable[[Any], Any]] | None = None,
        targets: Mapping[str, int] | None = None,
        clock: Clock | None = None,
        workers: int = 2,
        metrics: ExecutorMetrics | None = None,
        prefix_groups: Mapping[str, str] | None = None,
        group_runners: Mapping[str, GroupRunner] | None = None,
        preprocess_on: Literal["pool", "caller", "auto"] = "auto",
        order: Order = "laxity",
        probe: bool = False,
        on_profile: Callable[[str, Profile], None] | None = None,
        staged: Mapping[str, LayerwiseServer] | None = None,
        device_sched: DeviceSched = "batch",
    ) -> None:
        if device_sched not in ("batch", "normal"):
            raise ValueError(f"device_sched must be 'batch' or 'normal', not {device_sched!r}")
        self.device_sched: DeviceSched = device_sched
        groups = dict(prefix_groups or {})
        group_runners = dict(group_runners or {})
        unrunnable = {g for g in groups.values() if g not in group_runners}
        if unrunnable:
            raise ValueError(f"no group runner for prefix group(s) {sorted(unrunnable)}")
        self.staged = dict(staged or {})
        missing = {s.model for s in sessions} - set(runners) - set(groups) - set(self.staged)
        if missing:
            raise ValueError(f"no runner for model(s) {sorted(missing)}")
        self.core = DutyCycle([s for s in sessions if s.model not in self.staged], profiles, targets,
                              prefix_groups=groups, order=order)
        self._staged_turn = 0
        self.runners = dict(runners)
        self.group_runners = group_runners
        self.preprocess = dict(preprocess or {})
        self.preprocess_on = preprocess_on
        self._prepare_s: dict[str, float] = {}  # model → mean seconds per conversion (EWMA)
        self.clock = clock or MonotonicClock()
        self.metrics = metrics or ExecutorMetrics()
        self.background_metrics = ExecutorMetrics()
        self._specs = {s.session_id: s for s in sessions}
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.RLock()
        self._drained = threading.Condition(self._lock)  # notified when the last pending request ends
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._ids = itertools.count(1)
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="vnx-prepost")
        self._thread: threading.Thread | None = None
        self._started_at = self.clock.now()
        self._prober = Prober() if probe else None
        self._samples: dict[str, Any] = {}  # model → the input of its last batch (probes copy it)
        self.on_profile = on_profile
        self.reply_scope: Callable[[], ContextManager[Any]] = contextlib.nullcontext
        """Entered around the futures a batch resolves together (its replies, or the drops of one
        scheduling step), in the thread that resolves them: the service over the bus publishes
        what their callbacks answer as one message per reply topic when the scope ends."""

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> "Executor":
        if self._thread is None:
            self._stop.clear()
            self._started_at = self.clock.now()
            self._thread = threading.Thread(target=self._device_loop, name="vnx-device", daemon=True)
            self._thread.start()
        return self

    def stop(self, drain_timeout_s: float = 10.0) -> None:
        """Stop after the queues drain (or ``drain_timeout_s`` on the clock); whatever is left is
        dropped as overload."""
        if self._thread is not None:
            self._wake.set()
            with self._lock:
                self.clock.wait_for(self._drained, lambda: not self._pending, drain_timeout_s)
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        for server in list(self.staged.values()):
            server.end_all("overload")
        with self._lock:
            left = list(self._pending)
        for rid in left:
            self._finish_drop(rid, "overload")
        self._pool.shutdown(wait=True)

    def __enter__(self) -> "Executor":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- requests -----------------------------------------------------------------------------
    def submit(self, session_id: str, payload: Any, deadline: float | None = None) -> Future[Reply]:
        """Queue one request. ``deadline`` is on this executor's clock (default: now + SLO);
        ``math.inf``: no deadline, the request runs in the slack of the real-time sessions (in the
        session's background twin)."""
        return self.submit_many(session_id, [payload], deadline)[0]

    def submit_many(self, session_id: str, payloads: Sequence[Any],
                    deadline: float | None = None) -> list[Future[Reply]]:
        """Queue one message's requests to one session (a frame's crops), one future each, in order.
        They arrive together: converted (in the caller or the pool), they enter the session's queue
        at once, so the device loop never takes the first alone while the others are still being
        converted or submitted, and the duty cycle counts them as one arrival of ``len(payloads)``
        requests, as the simulator does. ``deadline`` as :meth:`submit`."""
        now = self.clock.now()
        if deadline == math.inf and session_id in self._specs and not self._specs[session_id].background \
                and self._specs[session_id].model not in self.staged:
            session_id = self._background_twin(session_id)
        spec = self._specs.get(session_id)
        metrics = self._metrics_of(session_id)
        futs: list[Future[Reply]] = [Future() for _ in payloads]
        for fut in futs:
            metrics.arrival(session_id, now)
            if spec is None:
                self.metrics.drop(session_id, "error")
                fut.set_result(Reply.dropped("error"))
        if spec is None:
            return futs
        due = deadline if deadline is not None else now + spec.slo_s
        group = [(next(self._ids), _Pending(session_id, now, due, fut)) for fut in futs]
        with self._lock:
            self._pending.update(group)
        pre = self.preprocess.get(spec.model)
        if pre is None:
            for (_, p), x in zip(group, payloads):
                p.input = x
            self._enqueue(group)
        elif (self.preprocess_on if self.preprocess_on != "auto"
              else prepare_where(self._prepare_s.get(spec.model))) == "caller":
            self._enqueue([(rid, p) for (rid, p), x in zip(group, payloads)
                           if self._prepare(rid, p, pre, x, spec.model)])
        else:  # each converted on a pool thread; the last one done enqueues those that converted
            ready: list[tuple[int, _Pending]] = []
            left = len(group)

            def one(rid: int, p: _Pending, x: Any) -> None:
                nonlocal left
                ok = self._prepare(rid, p, pre, x, spec.model)
                with self._lock:
                    if ok:
                        ready.append((rid, p))
                    left -= 1
                    last = left == 0
                if last:
                    self._enqueue(sorted(ready, key=lambda item: item[0]))

            for (rid, p), x in zip(group, payloads):
                self._pool.submit(one, rid, p, x)
        return futs

    def _background_twin(self, session_id: str) -> str:
        """The background twin of a hosted real-time session, added on its first request."""
        twin = background_of(session_id)
        with self._lock:
            if twin not in self._specs and session_id in self._specs:
                rt = self._specs[session_id]
                spec = SessionSpec(twin, rt.model, math.inf, max_queue=rt.max_queue, background=True)
                self.core.add_session(spec)
                self._specs[twin] = spec
        return twin

    def _metrics_of(self, session_id: str) -> ExecutorMetrics:
        return self.background_metrics if session_id.endswith(BACKGROUND_SUFFIX) else self.metrics

    def _prepare(self, rid: int, p: _Pending, pre: Callable[[Any], Any], payload: Any, model: str) -> bool:
        """Convert one request's payload into its input; whether it converted (bad input: a drop
        for this request only)."""
        try:
            t0 = self.clock.now()
            p.input = pre(payload)
            took = self.clock.now() - t0
            mean = self._prepare_s.get(model)
            self._prepare_s[model] = took if mean is None else mean + 0.1 * (took - mean)
        except Exception as e:
            logger.warning("preprocess failed for session %s: %s", p.session_id, e)
            self._finish_drop(rid, "error")
            return False
        return True

    def _enqueue(self, items: Sequence[tuple[int, _Pending]]) -> None:
        """Queue one message's requests (one session's) together, at one time."""
        if not items:
            return
        now = self.clock.now()
        with self._lock:
            spec = self._specs.get(items[0][1].session_id)
            server = self.staged.get(spec.model) if spec is not None else None
        if server is not None:
            for rid, p in items:
                p.enqueued = now
                server.submit(p.input, deadline=p.deadline, tag=p.session_id).add_done_callback(
                    partial(self._staged_done, rid))
            self._wake.set()
            return
        shed: list[tuple[int, DropReason]] = []
        with self._lock:
            for rid, p in items:
                p.enqueued = now
                d = self.core.enqueue(p.session_id, rid, p.deadline, now)
                if d is not None:
                    shed.append((rid, d.reason))
        for rid, reason in shed:
            self._finish_drop(rid, reason)
        if len(shed) < len(items):
            self._wake.set()

    def _staged_done(self, rid: int, f: Future[Reply]) -> None:
        """A layer-wise request ended (answered, or dropped by its server)."""
        r = f.result()
        p = self._pop(rid)
        if p is None:
            return
        now = self.clock.now()
        lat = now - p.arrival
        if r.ok:
            self._metrics_of(p.session_id).reply(p.session_id, lat, p.enqueued - p.arrival, now <= p.deadline)
            p.future.set_result(Reply.answer(r.output, latency_s=lat, batch=r.batch))
        else:
            reason = r.reason or "error"
            self._metrics_of(p.session_id).drop(p.session_id, reason)
            p.future.set_result(Reply.dropped(reason, latency_s=lat))

    # -- device loop ----------------------------------------------------------------------------
    def _device_loop(self) -> None:
        if self.device_sched == "batch" and not schedule_as_batch():
            logger.debug("the device thread keeps its scheduling policy (no SCHED_BATCH here)")
        while not self._stop.is_set():
            if self.staged and self._run_staged(before_rt=True):
                continue
            with self._lock:
                step = self.core.schedule(self.clock.now())
                held = self.core.queued()
            if step.dropped:
                with self.reply_scope():
                    for d in step.dropped:
                        self._finish_drop(d.request_id, d.reason)
            if step.dispatch is None:
                if self.staged and self._run_staged(before_rt=False):
                    continue
                held = held or any(s.has_work() for s in list(self.staged.values()))
                if self._prober is not None and self._probe():
                    continue
                # The policies are work-conserving (they run or drop what is queued): wait on the
                # clock for an enqueue or stop(); a policy holding requests back is asked again in 50 ms.
                self.clock.wait(self._wake, 0.05 if held else None)
                self._wake.clear()
                continue
            self._run(step.dispatch)

    def _run(self, dispatch: Dispatch) -> None:
        with self._lock:
            items = [self._pending[rid] for rid in dispatch.request_ids]
            runner = self.runners.get(dispatch.model)  # read under the lock: a retirement may unload it
        t0 = self.clock.now()
        try:
            if dispatch.group is not None:
                by_id = dict(zip(dispatch.request_ids, items))
                per_part = self.group_runners[dispatch.group].run_parts(
                    [(part.model, [by_id[r].input for r in part.request_ids]) for part in dispatch.parts]
                )
                outputs = [o for outs in per_part for o in outs]
            else:
                if runner is None:
                    raise ValueError(f"model {dispatch.model} was unloaded")
                outputs = runner([p.input for p in items])
            if len(outputs) != len(items):
                raise ValueError(f"runner returned {len(outputs)} outputs for {len(items)} inputs")
        except Exception as e:
            logger.error("batch of %d on model %s failed: %s", len(items), dispatch.model, e)
            with self.reply_scope():
                for rid in dispatch.request_ids:
                    self._finish_drop(rid, "error")
            return
        seconds = self.clock.now() - t0
        if self._prober is not None and dispatch.group is None and items:
            self._samples[dispatch.model] = items[0].input
        with self._lock:
            self.core.observed(dispatch, seconds)
        for part in dispatch.parts or ():
            if part.session_id != dispatch.session_id:
                self._metrics_of(part.session_id).batch(part.session_id, len(part.request_ids), 0.0)
        lead = len(dispatch.parts[0].request_ids) if dispatch.parts else dispatch.batch
        self._metrics_of(dispatch.session_id).batch(dispatch.session_id, lead, seconds)
        self._pool.submit(self._reply_batch, dispatch, outputs)

    def _run_staged(self, before_rt: bool) -> bool:
        """One layer group of a layer-wise model (in turn among those with work); ``before_rt``:
        only one that ends before the next whole-model real-time batch must start. Whether one ran."""
        with self._lock:
            servers = list(self.staged.values())
            until = self.core.rt_deadline(self.clock.now()) if before_rt else math.inf
            self._staged_turn += 1
        for i in range(len(servers)):
            server = servers[(self._staged_turn + i) % len(servers)]
            t0 = self.clock.now()
            try:
                tags = server.step(until)
            except Exception as e:  # a failing group: its requests in flight end, the device goes on
                logger.error("a layer group of model %s failed: %s", server.runner.name, e)
                server.end_all("error")
                return True
            if tags:
                self._metrics_of(tags[0]).batch(tags[0], len(tags), self.clock.now() - t0)
                return True
        return False

    def _probe(self) -> bool:
        """Run one probe batch if one is wanted and ends before the next real-time batch must
        start (:meth:`DutyCycle.rt_deadline`); whether one ran."""
        assert self._prober is not None
        with self._lock:
            now = self.clock.now()
            slos: dict[str, list[float]] = {}
            for spec in self._specs.values():
                if not spec.background and math.isfinite(spec.slo_s) and spec.model in self._samples \
                        and spec.model in self.runners:
                    slos.setdefault(spec.model, []).append(spec.slo_s)
            if not slos:
                return False
            factors = {m: float(getattr(self.runners[m], "first_run_factor", FIRST_RUN_FACTOR)) for m in slos}
            pick = self._prober.want(self.core.profiles(), slos, now, self.core.rt_deadline(now), factors)
            if pick is None:
                return False
            model, b = pick
            runner, x = self.runners[model], self._samples[model]
        t0 = self.clock.now()
        try:
            out = runner([x] * b)
            if len(out) != b:
                raise ValueError(f"runner returned {len(out)} outputs for {b} inputs")
        except Exception as e:  # out of memory, a runner that refuses the size: never again
            logger.warning("probe of batch %d on model %s failed: %s", b, model, e)
            with self._lock:
                self._prober.failed(model, b)
            return True
        seconds = self.clock.now() - t0
        with self._lock:
            profiles = self.core.profiles()  # a retirement may have unloaded the model meanwhile
            extended = self._prober.ran(model, b, seconds, profiles[model]) if model in profiles else None
            if extended is not None:
                self.core.with_profile(model, extended)
        if extended is not None:
            logger.info("profiled %s at batch %d in the background: %.1f ms", model, b, 1000 * extended.latency(b))
            if self.on_profile is not None:
                self.on_profile(model, extended)
        return True

    def _reply_batch(self, dispatch: Dispatch, outputs: list[Any]) -> None:
        now = self.clock.now()
        with self.reply_scope():
            for rid, out in zip(dispatch.request_ids, outputs):
                p = self._pop(rid)
                if p is None:
                    continue
                lat = now - p.arrival
                self._metrics_of(p.session_id).reply(p.session_id, lat, p.enqueued - p.arrival, now <= p.deadline)
                p.future.set_result(Reply.answer(out, latency_s=lat, batch=dispatch.batch))

    def _pop(self, rid: int) -> _Pending | None:
        with self._lock:
            p = self._pending.pop(rid, None)
            if not self._pending:
                self._drained.notify_all()
        return p

    def _finish_drop(self, rid: int, reason: DropReason) -> None:
        p = self._pop(rid)
        if p is None:
            return
        self._metrics_of(p.session_id).drop(p.session_id, reason)
        p.future.set_result(Reply.dropped(reason, latency_s=self.clock.now() - p.arrival))

    # -- introspection --------------------------------------------------------------------------
    def stats(self) -> list[dict[str, Any]]:
        """Per real-time session: arrivals, replies, drops by reason, batches, latency quantiles."""
        return self.metrics.snapshot(self.clock.now() - self._started_at)

    def background_stats(self) -> list[dict[str, Any]]:
        """The same for the background twins (``<session>~bg``) that have had requests."""
        return self.background_metrics.snapshot(self.clock.now() - self._started_at)

    def targets(self) -> dict[str, int]:
        """Batch size per session: the plan's (or the local planner's); a layer-wise session's is
        its server's largest batch."""
        with self._lock:
            return {**self.core.targets(), **{sid: self.staged[spec.model].max_batch
                                              for sid, spec in self._specs.items() if spec.model in self.staged}}

    def sessions(self) -> list[SessionSpec]:
        """Every session hosted here (background twins included)."""
        with self._lock:
            return list(self._specs.values())

    def profiles(self) -> dict[str, Profile]:
        """Every model's current ℓ(b); a layer-wise model's is the sum of its groups'."""
        with self._lock:
            return {**self.core.profiles(), **{m: server.profile for m, server in self.staged.items()}}

    def add_session(self, spec: SessionSpec, runner: Runner | None = None, profile: Profile | None = None,
                    preprocess: Callable[[Any], Any] | None = None, staged: LayerwiseServer | None = None) -> None:
        """Host one more session (a plan gave it to this executor); ``runner``, ``profile`` and its
        input conversion ``preprocess`` when its model is new here, or ``staged``, its layer-wise
        server. Idempotent for a session already hosted."""
        with self._lock:
            if spec.session_id in self._specs:
                return
            if staged is not None:
                self.staged[spec.model] = staged
            if spec.model in self.staged:
                if preprocess is not None:
                    self.preprocess[spec.model] = preprocess
                self._specs[spec.session_id] = spec
                return
            if runner is not None:
                self.runners[spec.model] = runner
                if preprocess is not None:
                    self.preprocess[spec.model] = preprocess
            if profile is not None:
                self.core.with_profile(spec.model, profile)
            if spec.model not in self.runners and spec.model not in self.core.prefix_groups():
                raise ValueError(f"session {spec.session_id}: model {spec.model} is not loaded here")
            self.core.add_session(spec)
            self._specs[spec.session_id] = spec

    def remove_session(self, session_id: str) -> list[str]:
        """Stop hosting a session (plans no longer assign it): requests still queued for it end as
        drops (reason ``retired``); models no remaining session uses are unloaded (their runners
        released; prefix groups keep theirs). Returns the models unloaded."""
        twin = background_of(session_id)
        if twin in self._specs:  # its background work goes with it
            self.remove_session(twin)
        with self._lock:
            spec = self._specs.pop(session_id, None)
            if spec is None:
                return []
            still = {s.model for s in self._specs.values()}
            server = None
            if spec.model in self.staged:  # the last session of a layer-wise model takes its server along
                dropped: tuple[Any, ...] = ()
                unloaded = [] if spec.model in still else [spec.model]
                if unloaded:
                    server = self.staged.pop(spec.model)
            else:
                dropped = self.core.remove_session(session_id)
                unloaded = [m for m in list(self.runners) if m == spec.model and m not in still
                            and m not in self.core.prefix_groups()]
                for m in unloaded:
                    del self.runners[m]
            for m in unloaded:
                self.preprocess.pop(m, None)
        if server is not None:
            server.end_all("retired")
        for d in dropped:
            self._finish_drop(d.request_id, "retired")
        return unloaded

    def hosted_sessions(self) -> list[str]:
        """The real-time sessions hosted here (not their background twins)."""
        with self._lock:
            return [sid for sid, spec in self._specs.items() if not sid.endswith(BACKGROUND_SUFFIX)]

    def hosts_model(self, model: str) -> bool:
        """Whether ``model`` can run here: its own runner, its prefix group's, or its layer-wise server."""
        with self._lock:
            return model in self.runners or model in self.core.prefix_groups() or model in self.staged

    def set_targets(self, targets: Mapping[str, int]) -> None:
        with self._lock:
            self.core.set_targets(targets)


