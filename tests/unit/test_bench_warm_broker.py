"""bench peers' broker warm-up (``warm_broker``): chunks until the JIT settles, or the cap."""

import os

from vidnexus.benchmarks.peers import warm_broker
from vidnexus.benchmarks.procstat import compiler_cpu_s


def _counting():
    calls = []

    def replay(trace):
        calls.append(len(trace))
        return []

    return replay, calls


def test_a_process_without_jit_settles_after_two_chunks():
    replay, calls = _counting()
    assert compiler_cpu_s(os.getpid()) == 0.0  # CPython compiles nothing with HotSpot's threads
    out = warm_broker(replay, [(1.0, 0.2)], 200.0, os.getpid(), chunk_s=0.05, max_s=1.0)
    assert out["settled"] and len(calls) == 2 and out["compiler_core_share_per_chunk"] == [0.0, 0.0]
    assert all(n > 0 for n in calls)  # each chunk sent its trace (Poisson at 200/s for 50 ms)


def test_a_broker_elsewhere_gets_the_whole_cap():
    replay, calls = _counting()
    out = warm_broker(replay, [(1.0, 0.2)], 200.0, None, chunk_s=0.05, max_s=0.2)
    assert not out["settled"] and len(calls) == 4 and out["seconds"] == 0.2
    assert out["compiler_core_share_per_chunk"] == [None] * 4
