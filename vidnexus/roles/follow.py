"""Reading the scheduler's plans from the compacted control topic (executors and workers follow them)."""

from __future__ import annotations

import logging

from vidnexus.connectors.bus import Bus, Consumer
from vidnexus.connectors.dead_letter import DeadLetters
from vidnexus.contracts.plans import EpochPlan, decode_plan
from vidnexus.contracts.topics import Topics
from vidnexus.errors import CodecError

__all__ = ["PlanFollower"]

logger = logging.getLogger(__name__)


class PlanFollower:
    """The newest plan on the control topic, read without blocking.

    Example:
        >>> from vidnexus.connectors.memory_bus import MemoryBus
        >>> from vidnexus.contracts.plans import encode_plan
        >>> bus, topics = MemoryBus(), Topics("doc")
        >>> f = PlanFollower(bus, topics)
        >>> bus.publish(topics.control, b"plan", encode_plan(EpochPlan(1, 3, 0.0)))
        >>> f.newest().epoch, f.newest()
        (3, None)
    """

    def __init__(self, bus: Bus, topics: Topics, dead_letters: DeadLetters | None = None) -> None:
        bus.create_topic(topics.control, 1, compacted=True)
        self.dead_letters = (dead_letters or DeadLetters(bus, topics, "plan follower")).expect("control")
        self._consumer: Consumer = bus.subscribe([topics.control], group=None, from_beginning=True)
        self.current: EpochPlan | None = None

    def newest(self, timeout_s: float = 0.0) -> EpochPlan | None:
        """A plan newer than any seen so far, or None (malformed documents are dead-lettered)."""
        newest: EpochPlan | None = None
        for m in self._consumer.poll(timeout_s=timeout_s):
            try:
                p = decode_plan(m.value)
            except CodecError as e:
                self.dead_letters.send(m, str(e))
                continue
            if p.supersedes(self.current):
                if self.current is None:  # the first plan this role sees: nothing to warn about
                    logger.info("following the plans of scheduler generation %d (epoch %d)", p.generation, p.epoch)
                elif p.generation != self.current.generation:
                    # A scheduler restarted (or another took over): its epochs count from 1 again.
                    logger.warning("following the plans of scheduler generation %d (epoch %d); was %d", p.generation,
                                   p.epoch, self.current.generation)
                self.current = newest = p
        return newest

    def close(self) -> None:
        self._consumer.close()
