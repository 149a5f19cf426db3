"""Control plane over the real broker: three executor processes of two device types — two "cheap"
(one thread, price 1) and one "fast" (two threads, price 3), each profiling its own models — and
the scheduler. The plans give the load to the cheap type (more throughput per price) and none to
the fast one; raising a session's rate changes the plan within one epoch; killing the cheap
executor that serves the load re-plans its sessions onto the other cheap one within one epoch;
every request meanwhile is answered or counted as dropped. The client routes by the plans' weights,
as workers do, each request to its executor's own topic."""

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import numpy as np
import pytest

from tests.role_process import read_until_ready
from vidnexus.config import Settings
from vidnexus.contracts.plans import decode_plan
from vidnexus.contracts.topics import Topics
from tests.integration.conftest import kafka_bus_of
from vidnexus.gpu_executor.client import ExecutorClient

EPOCH_S = 4.0
SESSIONS = ("lenet5-200ms", "mobilenet_v3_small-2000ms")


def launch(env, *args):
    return subprocess.Popen([sys.executable, "-m", "vidnexus", *args], env=env, stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)


def await_ready(p, ready, what):
    log = []
    if read_until_ready(p, ready, 180, log):
        return p
    p.kill()
    pytest.fail(f"`vidnexus {what}` did not start: {''.join(log[-20:])}")


def start(env, *args, ready):
    return await_ready(launch(env, *args), ready, " ".join(args))


class Plans:
    def __init__(self, bus, settings, on_plan):
        self.c = bus.subscribe([Topics(settings.topic_prefix).control], group=None, from_beginning=True)
        self.docs = []
        self.on_plan = on_plan

    def wait(self, cond, timeout_s, what):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for m in self.c.poll(timeout_s=0.5):
                self.docs.append(decode_plan(m.value))
                self.on_plan(self.docs[-1])
            for d in self.docs:
                if cond(d):
                    return d
        pytest.fail(f"no plan {what} within {timeout_s} s; last: {self.docs[-1] if self.docs else None}")


def test_plans_follow_load_and_executor_failure(kafka_bootstrap, tmp_path):
    prefix = f"sch{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, VNX_BUS="kafka", VNX_KAFKA_BOOTSTRAP=kafka_bootstrap, VNX_TOPIC_PREFIX=prefix,
               VNX_DATA_DIR=str(tmp_path / "data"))
    settings = Settings(bus="kafka", kafka_bootstrap=kafka_bootstrap, topic_prefix=prefix)
    procs = {}
    sched = None
    stop = threading.Event()
    bus = kafka_bus_of("confluent", kafka_bootstrap)
    try:
        kinds = {"e1": ("cheap", "1", "1"), "e2": ("cheap", "1", "1"), "f1": ("fast", "3", "2")}
        for eid, (kind, price, threads) in kinds.items():  # started together: they profile at once
            procs[eid] = launch(env, "executor", "--id", eid, "--stats-every", "1", "--threads", threads,
                                "--device-type", kind, "--price", price,
                                "-s", "lenet5:200", "-s", "mobilenet_v3_small:2000")
        for eid, p in procs.items():
            await_ready(p, "executor: serving", f"executor --id {eid}")
        sched = start(env, "scheduler", "--epoch", str(EPOCH_S), "--min-epoch", "1", ready="scheduler: running")
        client = ExecutorClient(bus, settings, "load")
        futures, rate = [], {"lenet5-200ms": 20.0, "mobilenet_v3_small-2000ms": 4.0}
        digit, image = np.zeros((1, 28, 28), np.float32), np.zeros((3, 224, 224), np.float32)

        def load():
            t = {s: time.monotonic() for s in rate}
            while not stop.is_set():
                now = time.monotonic()
                for s, r in rate.items():
                    if now >= t[s]:
                        x = digit if s.startswith("lenet5") else image
                        # Routed to a killed executor, a request waits for no one: it times out.
                        futures.append((time.monotonic(), client.submit(s, x, slo_s=5.0,
                                                                        expires_wall=client.wall() + 10.0)))
                        t[s] = now + 1.0 / r
                time.sleep(0.002)

        loader = threading.Thread(target=load, daemon=True)
        loader.start()
        plans = Plans(bus, settings, lambda doc: client.route(doc.routing))  # as workers do
        first = plans.wait(lambda d: d.rates.get("lenet5-200ms", 0) > 5 and len(d.executors) == 3,
                           EPOCH_S * 4 + 10, "with the three executors and the initial load")
        assert not first.assignment_of("f1"), first.assignments  # the fast type costs more per request
        rate["lenet5-200ms"] = 200.0  # 10×; the loader thread may reach less on a busy machine
        raised = time.monotonic()
        base = first.rates["lenet5-200ms"]
        raised_plan = plans.wait(lambda d: d.epoch > first.epoch and d.rates.get("lenet5-200ms", 0) > 2 * base,
                                 EPOCH_S + 4, "reflecting the raised rate")
        assert time.monotonic() - raised <= EPOCH_S + 4
        assert not raised_plan.assignment_of("f1"), raised_plan.assignments
        rate["lenet5-200ms"] = 20.0
        latest = plans.docs[-1]
        victim = next((e for e in ("e2", "e1") if latest.assignments.get(e)), "e2")
        survivor = "e1" if victim == "e2" else "e2"
        procs[victim].send_signal(signal.SIGKILL)
        procs[victim].wait()
        killed = time.monotonic()
        moved = plans.wait(lambda d: d.executors == tuple(sorted((survivor, "f1"))) and
                           set(d.assignments.get(survivor, {})) >= set(SESSIONS), 3.0 + EPOCH_S + 4,
                           "moving every session onto the surviving cheap executor")
        assert victim not in moved.assignments and not moved.assignment_of("f1")
        assert time.monotonic() - killed <= 3.0 + EPOCH_S + 4
        # The dead member's partitions stay with it until Kafka's session timeout (6 s) expires and
        # the group rebalances; what it held is redelivered late and ends as deadline drops. Requests
        # sent well after that are served by the survivor.
        time.sleep(20)
        recovered = time.monotonic() - 4
        stop.set()
        loader.join()
        bus.flush()
        replies = [(t, f.result(timeout=90)) for t, f in futures]
        assert len(replies) == len(futures) > 100  # every request answered or dropped, none lost
        reasons = {r.reason for _, r in replies if not r.ok}
        assert reasons <= {"early_drop", "deadline", "overload", "error", "timeout"}
        late = [r for t, r in replies if t >= recovered]
        assert late and sum(r.ok for r in late) >= 0.8 * len(late), [r.reason for r in late if not r.ok][:5]
        # The requests went where the plans routed them: the survivor's own topic of each session.
        routed = bus.subscribe([Topics(prefix).routed_requests(s, survivor) for s in SESSIONS], group=None)
        seen = set()
        for _ in range(20):
            seen |= {m.topic for m in routed.poll(timeout_s=0.5)}
        routed.close()
        assert seen == {Topics(prefix).routed_requests(s, survivor) for s in SESSIONS}
        client.close()
    finally:
        stop.set()
        for p in [*procs.values(), sched]:
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
        bus.close()
