"""Calling executor sessions over the Bus: one future per request, replies matched by request id.

A reply's ``latency_s`` is what the caller saw, from submit to reply, bus hops included; the
executor's own figure is in ``executor_latency_s``."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

import numpy as np

from vidnexus.clock import MonotonicClock, wall_time
from vidnexus.config import Settings
from vidnexus.connectors.bus import Bus
from vidnexus.errors import CodecError
from vidnexus.gpu_executor.service import request_topic
from vidnexus.gpu_executor.wire import InferRequest, WireReply, decode_reply, encode_request

__all__ = ["ExecutorClient"]


class ExecutorClient:
    """Send requests to sessions and receive replies on this client's own reply topic."""

    def __init__(self, bus: Bus, settings: Settings, name: str | None = None) -> None:
        self.bus, self.settings = bus, settings
        self._clock = MonotonicClock()
        self.reply_topic = settings.topic(f"replies.{name or uuid.uuid4().hex[:12]}")
        bus.create_topic(self.reply_topic, 1)
        self._futures: dict[str, tuple[Future[WireReply], float]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._consumer = bus.subscribe([self.reply_topic], group=None, from_beginning=True)
        self._thread = threading.Thread(target=self._listen, daemon=True, name="vnx-client")
        self._thread.start()

    def submit(self, session_id: str, x: np.ndarray, *, slo_s: float | None = None,
               deadline_wall: float | None = None, **meta: Any) -> Future[WireReply]:
        rid = uuid.uuid4().hex
        fut: Future[WireReply] = Future()
        with self._lock:
            self._futures[rid] = (fut, self._clock.now())
        fut.add_done_callback(lambda f, rid=rid: self._forget(rid) if f.cancelled() else None)
        dl = deadline_wall if deadline_wall is not None else wall_time() + (slo_s or 1.0)
        req = InferRequest(rid, session_id, dl, self.reply_topic, x, **meta)
        self.bus.publish(request_topic(self.settings, session_id), rid.encode(), encode_request(req))
        return fut

    def flush(self) -> None:
        self.bus.flush()

    def _forget(self, rid: str) -> None:
        """A caller gave up on a request (timeout): a late reply is then ignored."""
        with self._lock:
            self._futures.pop(rid, None)

    @property
    def outstanding(self) -> int:
        with self._lock:
            return len(self._futures)

    def _listen(self) -> None:
        while not self._stop.is_set():
            for m in self._consumer.poll(timeout_s=0.1):
                try:
                    rep = decode_reply(m.value)
                except CodecError:
                    continue
                with self._lock:
                    entry = self._futures.pop(rep.request_id, None)
                if entry is not None and not entry[0].done():
                    fut, sent = entry
                    fut.set_result(replace(rep, executor_latency_s=rep.latency_s,
                                           latency_s=self._clock.now() - sent))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._consumer.close()
