"""The scheduler role: read executor stats and app reports, plan each epoch
(:func:`vidnexus.control.scheduler.plan_epoch`), publish the plan on the compacted control topic."""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from typing import Callable

from vidnexus.clock import Clock, MonotonicClock
from vidnexus.config import Settings
from vidnexus.connectors.bus import Bus, Consumer, Message
from vidnexus.connectors.dead_letter import DeadLetters
from vidnexus.connectors.outage import Health, Outage
from vidnexus.contracts.plans import EpochPlan, encode_plan
from vidnexus.contracts.reports import decode_report
from vidnexus.contracts.stats import decode_stats
from vidnexus.contracts.topics import Topics
from vidnexus.control.scheduler import (Observed, SchedulerConfig, SchedulerState, due, observe_report,
                                        observe_stats, plan_epoch)
from vidnexus.errors import CodecError

__all__ = ["SchedulerRole"]

logger = logging.getLogger(__name__)


class SchedulerRole:
    """The control plane's loop; the decisions are :mod:`vidnexus.control.scheduler`'s.

    ``generation`` (default: now, wall-clock ms) orders this scheduler's plans after any earlier
    scheduler's, whatever epoch that one had reached.
    """

    def __init__(self, settings: Settings, *, bus: Bus, clock: Clock | None = None,
                 config: SchedulerConfig = SchedulerConfig(), generation: int | None = None,
                 on_plan: Callable[[EpochPlan], None] | None = None) -> None:
        self.bus, self.config, self.on_plan = bus, config, on_plan
        self.clock = clock or MonotonicClock()
        self.topics = Topics(settings.topic_prefix)
        self.state = SchedulerState(generation if generation is not None else int(self.clock.wall() * 1000))
        self.seen = Observed()
        for topic, compacted in ((self.topics.control, True), (self.topics.stats, False), (self.topics.apps, False)):
            bus.create_topic(topic, 1, compacted=compacted)
        self._consumer: Consumer | None = None
        self.outage = Outage("scheduler", self.clock, give_up_s=settings.give_up_s)
        self.dead_letters = DeadLetters(bus, self.topics, "scheduler").expect("stats", "apps")

    def start(self) -> "SchedulerRole":
        if self._consumer is None:
            self._consumer = self.bus.subscribe([self.topics.stats, self.topics.apps], group=None,
                                                from_beginning=False)
        return self

    def receive(self, m: Message) -> None:
        """Take one stats or app-report message (malformed ones are dead-lettered)."""
        now = self.clock.now()
        try:
            if m.topic == self.topics.apps:
                self.seen = observe_report(self.seen, now, decode_report(m.value))
            else:
                self.seen = observe_stats(self.seen, now, decode_stats(m.value))
        except CodecError as e:
            self.dead_letters.send(m, str(e))

    def health(self) -> Health:
        """The role's health, with its dead letters by source."""
        return replace(self.outage.health(), dead_letters=self.dead_letters.snapshot())

    def epoch(self) -> EpochPlan:
        """Plan now and publish the plan."""
        plan, self.state = plan_epoch(self.clock.now(), self.clock.wall(), self.seen, self.state, self.config)
        self.bus.publish(self.topics.control, b"plan", encode_plan(plan))
        self.bus.flush()
        logger.info("epoch %d: %d executors, %d moved", plan.epoch, len(plan.executors), plan.moved)
        if self.on_plan is not None:
            self.on_plan(plan)
        return plan

    def step(self, timeout_s: float = 0.5) -> EpochPlan | None:
        """Read what arrived; plan when an epoch is due. Returns the plan published, if any."""
        self.start()
        assert self._consumer is not None
        for m in self._consumer.poll(timeout_s=timeout_s):
            self.receive(m)
        if due(self.clock.now(), self.state, self.seen, self.config):
            return self.epoch()
        return None

    def run(self, stop: threading.Event) -> None:
        """:meth:`step` until ``stop``, riding out a broker outage (the next epoch is planned and
        published once the broker is back)."""
        try:
            self.outage.ride_out(self.step, stop)
        finally:
            self.stop()

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
