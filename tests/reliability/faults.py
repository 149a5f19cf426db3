"""Fault injection on the distributed pipeline (issue 29): a private Kafka broker and ClickHouse
server, every role as its own process (ingest, executor, scheduler, worker, sink), synthetic HUD
streams ingested at real time, and one fault per run: a role killed (SIGKILL, restarted at once)
or frozen past the group session timeout (SIGSTOP … SIGCONT), the broker killed and restarted, the
store killed and restarted after a while, the scheduler restarted after many epochs,
malformed records published on every topic the roles read (frames, requests, replies, rows,
control, stats, apps), or — ``cluster-executor-dies`` — a cluster of three executors of two device
types (two "cheap" at price 1, one "fast" at two threads and price 3) and two workers, where the
executor serving the session is killed for good: the scheduler must re-home its session, on the
other cheap executor, and every frame must still be accounted (``rehomed_in_s``, ``homes``).

A run's verdict, from the store (under FINAL) and ingest's own status:

- ``lost``: sampled frames with no ``vnx_frames`` row;
- ``foreign``: ``vnx_frames`` rows of frame numbers the sources never had (an identity reused);
- ``duplicates``: result rows beyond one per frame;
- ``answered_and_dropped``: frames with a result row whose outcome is a drop;
- ``unaccounted``: ``sampled - published - rejected - undelivered`` in ``stream_status``;
- ``roles_down``: roles other than the one the fault restarted that were no longer running;
- ``dead_letters`` (the ``malformed`` fault): per source, the records on ``dead.<source>`` with
  their reason and reader, which must be every malformed record published (control records are
  read by the executor and the worker: two each).

A run passes when all are 0. The unit-sized faults run in ``make test``
(tests/reliability/test_faults.py); every fault, with the figures saved:

    python -m tests.reliability.faults --out bench/results/faults-$(date +%F).json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from tests.role_process import read_until_ready
from vidnexus.config import Settings
from vidnexus.connectors.clickhouse_store import ClickHouseStore
from vidnexus.services.clickhouse import ClickHouseService
from vidnexus.services.kafka import KafkaService
from vidnexus.streams.registry import StreamRegistry
from vidnexus.streams.sampling import FpsSampler
from vidnexus.streams.spec import StreamSpec

ROOT = Path(__file__).resolve().parents[2]
APP_REF = "tests.integration.apps.hud_patient:app"
APP = "hud_patient"
TABLE = "hud_patient_reads"
SESSION = "hud_digits:600000"
ROLES = ("ingest", "executor", "scheduler", "worker", "sink")
READY = {"ingest": "ingest:", "executor": "executor: serving", "scheduler": "scheduler: running",
         "worker": "started", "sink": "sink:"}


# -- private services ----------------------------------------------------------------------------
@dataclass
class Services:
    """A broker and a ClickHouse server of the fault runs' own (killing the shared ones would
    disturb every other test)."""

    kafka: KafkaService
    clickhouse: ClickHouseService
    bootstrap: str
    url: str

    @classmethod
    def start(cls, work_dir: Path, *, kafka_port: int = 29092, clickhouse_port: int = 29000,
              clickhouse_http_port: int = 28123) -> "Services":
        s = Settings(work_dir=work_dir, kafka_port=kafka_port, clickhouse_tcp_port=clickhouse_port,
                     clickhouse_http_port=clickhouse_http_port)
        kafka, ch = KafkaService(s), ClickHouseService(s)
        kafka.start()
        ch.start()
        return cls(kafka, ch, f"127.0.0.1:{kafka_port}", f"clickhouse://default:@127.0.0.1:{clickhouse_port}/default")

    def stop(self) -> None:
        self.kafka.stop()
        self.clickhouse.stop()


def kill9(service: Any) -> None:
    pid = service.pid()
    assert pid is not None, f"{service.name} is not running"
    os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while service.pid() is not None and time.monotonic() < deadline:
        time.sleep(0.1)


# -- roles ---------------------------------------------------------------------------------------
@dataclass
class Role:
    name: str
    args: list[str]
    proc: subprocess.Popen[str]
    log: list[str] = field(default_factory=list)


def start_role(env: dict[str, str], name: str, args: list[str], timeout_s: float = 240) -> Role:
    p = subprocess.Popen([sys.executable, "-m", "vidnexus", name, *args], env=env, stderr=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, text=True, cwd=ROOT)
    role = Role(name, args, p)
    if read_until_ready(p, READY[name], timeout_s, role.log):
        return role
    p.kill()
    raise RuntimeError(f"`vidnexus {name}` did not start:\n{''.join(role.log[-30:])}")


def stop_role(r: Role) -> None:
    if r.proc.poll() is None:
        r.proc.send_signal(signal.SIGCONT)
        r.proc.send_signal(signal.SIGTERM)
        try:
            r.proc.wait(60)
        except subprocess.TimeoutExpired:
            r.proc.kill()
            r.proc.wait(10)


def _log_time(line: str) -> float:
    """The wall-clock time of a role's log line (``2026-11-23 16:40:01,123 WARNING …``)."""
    import datetime as dt

    try:
        return dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except ValueError:
        return float("inf")


# -- faults --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fault:
    name: str
    what: str
    """kill, stop, broker, store, scheduler-restart or malformed."""
    role: str = ""
    seconds: float = 0.0
    """How long a stopped role stays frozen, or a killed service stays down."""


FAULTS: dict[str, Fault] = {f.name: f for f in [
    *(Fault(f"kill-{r}", "kill", r) for r in ROLES),
    *(Fault(f"stop-{r}", "stop", r, 15.0) for r in ("executor", "worker", "sink")),
    Fault("broker-restart", "broker", seconds=5.0),
    Fault("store-down-60s", "store", seconds=60.0),
    Fault("store-down-20s", "store", seconds=20.0),
    Fault("scheduler-restart", "scheduler-restart"),
    Fault("malformed", "malformed"),
    Fault("cluster-executor-dies", "cluster"),
]}
QUICK = ("kill-ingest", "broker-restart", "store-down-20s", "scheduler-restart", "malformed", "cluster-executor-dies")
"""The faults ``make test`` runs (tests/reliability/test_faults.py)."""


@dataclass
class Verdict:
    fault: str
    streams: int
    seconds: float
    expected: int
    accounted: int = 0
    lost: int = 0
    foreign: int = 0
    duplicates: int = 0
    answered_and_dropped: int = 0
    unaccounted: int = 0
    roles_down: list[str] = field(default_factory=list)
    not_following: list[str] = field(default_factory=list)
    """Roles that did not follow a restarted scheduler's plans."""
    status: dict[str, int] = field(default_factory=dict)
    drops: dict[str, int] = field(default_factory=dict)
    undelivered: int = 0
    replayed_rows: int = 0
    """vnx_frames rows beyond one per frame still unmerged at the end: a lower bound on the frames
    processed again after the fault (the server's background merges remove such rows within
    seconds, so 0 does not mean there was no replay)."""
    dead_letters: dict[str, int] = field(default_factory=dict)
    dead_letters_expected: dict[str, int] = field(default_factory=dict)
    homes: list[list[str]] = field(default_factory=list)
    """``cluster-executor-dies``: the executors the plans route the app's requests to, before the
    kill and after."""
    rehomed_in_s: float = 0.0
    """``cluster-executor-dies``: from the kill to the first plan that routes the app's requests to
    live executors only (-1: none did)."""
    fault_at_s: float = 0.0
    recovered_in_s: float = 0.0
    """From the fault's end to the first frame accounted after it."""
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.foreign or self.duplicates or self.answered_and_dropped or self.unaccounted
                    or self.roles_down or self.not_following or self.accounted != self.expected
                    or self.dead_letters != self.dead_letters_expected or self.rehomed_in_s < 0)


def expected_frames(url_seconds: float, fps: float = 10.0, sample_fps: float = 5.0) -> list[int]:
    """The source indices ingest samples from ``synthetic://hud?fps=…&seconds=…`` (same sampler)."""
    s = FpsSampler(sample_fps)
    return [i for i in range(int(round(url_seconds * fps))) if s.keep(i / fps, i)]


class Run:
    """One fault run (see the module docstring)."""

    def __init__(self, services: Services, fault: Fault, *, streams: int = 2, seconds: float = 40.0,
                 fault_at_s: float = 12.0, data_dir: Path | None = None, log: Callable[[str], None] = print) -> None:
        self.services, self.fault, self.log = services, fault, log
        self.n_streams, self.seconds, self.fault_at_s = streams, seconds, fault_at_s
        self.tag = f"f{uuid.uuid4().hex[:6]}"
        self.prefix = f"flt{self.tag}"
        self.names = [f"{self.tag}-cam{i}" for i in range(streams)]
        data = (data_dir or Settings().data_dir).resolve()
        self.env = dict(os.environ, VNX_BUS="kafka", VNX_STORE="clickhouse", VNX_KAFKA_BOOTSTRAP=services.bootstrap,
                        VNX_CLICKHOUSE_URL=services.url, VNX_TOPIC_PREFIX=self.prefix, PYTHONPATH=str(ROOT),
                        VNX_DATA_DIR=str(data), VNX_CONNECT_TIMEOUT_S="10")
        self.roles: dict[str, Role] = {}
        self.killed_for_good = ""
        self.restarted_wall = 0.0
        self.args = {"ingest": ["--poll", "1"], "executor": ["-s", SESSION, "--threads", "1", "--stats-every", "1"],
                     "scheduler": ["--epoch", "0.5", "--min-epoch", "0.2"], "worker": [APP_REF, "--concurrency", "8"],
                     "sink": ["--max-delay", "0.3"]}

    # -- the run ---------------------------------------------------------------------------------
    def execute(self) -> Verdict:
        t0 = time.monotonic()
        v = Verdict(self.fault.name, self.n_streams, self.seconds, self.n_streams * len(expected_frames(self.seconds)))
        store = ClickHouseStore(self.services.url, timeout_s=10)
        try:
            reg = StreamRegistry(store)
            for i, name in enumerate(self.names):
                reg.add(StreamSpec(name, f"synthetic://hud?seed={200 + i}&fps=10&seconds={self.seconds:g}", fps=5.0,
                                   realtime=True, apps=(APP,)), check=False)
            for key, (r, args) in self.layout().items():
                self.roles[key] = start_role(self.env, r, args)
            started = time.monotonic()
            self.roles["ingest"] = start_role(self.env, "ingest", self.args["ingest"])
            self.log(f"{self.fault.name}: roles up in {started - t0:.0f} s; streams {', '.join(self.names)}")
            while time.monotonic() - started < self.fault_at_s:
                time.sleep(0.2)
            v.fault_at_s = round(time.monotonic() - started, 1)
            fault_end = self.inject(store, v)
            self.log(f"{self.fault.name}: fault over after {time.monotonic() - started:.0f} s")
            before = self.accounted(store)
            self.wait(store, v, before, fault_end, deadline_s=self.seconds + 240)
            v.roles_down = [r for r, role in self.roles.items()
                            if role.proc.poll() is not None and r != self.killed_for_good]
            self.judge(store, v)
        finally:
            for r in self.roles.values():
                stop_role(r)
            store.close()
        v.wall_s = round(time.monotonic() - t0, 1)
        return v

    CLUSTER = {"cheap-1": ("cheap", "1", "1"), "cheap-2": ("cheap", "1", "1"), "fast-1": ("fast", "3", "2")}
    """``cluster-executor-dies``: executor id → (device type, price, threads)."""

    def layout(self) -> dict[str, tuple[str, list[str]]]:
        """The roles started before ingest: key → (role, its arguments)."""
        out = {r: (r, self.args[r]) for r in ("executor", "sink", "scheduler", "worker")}
        if self.fault.what == "cluster":
            del out["executor"]
            for eid, (kind, price, threads) in self.CLUSTER.items():
                args = ["-s", SESSION, "--threads", threads, "--stats-every", "1", "--id", eid,
                        "--device-type", kind, "--price", price]
                out[f"executor:{eid}"] = ("executor", args)
            out["worker:2"] = ("worker", self.args["worker"])
        return out

    def newest_plan(self, bus: Any, consumer: Any, timeout_s: float, cond: Callable[[Any], bool]) -> Any:
        """The first plan on the control topic that ``cond`` accepts within ``timeout_s`` (None)."""
        from vidnexus.contracts.plans import decode_plan

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for m in consumer.poll(timeout_s=0.5):
                doc = decode_plan(m.value)
                if cond(doc):
                    return doc
        return None

    def kill_serving_executor(self, v: Verdict) -> None:
        """Kill the executor the newest plan routes most of the model's requests to (the app's
        session at its split SLO); time until a plan routes them to live executors only."""
        from vidnexus.contracts.sessions import SessionKey
        from vidnexus.contracts.topics import Topics

        model = SessionKey.from_arg(SESSION).model

        def homes(doc: Any) -> dict[str, float]:
            out: dict[str, float] = {}
            for sid, per in doc.routing.items():
                if sid.startswith(f"{model}-"):
                    for e, r in per.items():
                        if r > 0:
                            out[e] = out.get(e, 0.0) + r
            return out

        bus = self._bus()
        c = bus.subscribe([Topics(self.prefix).control], group=None, from_beginning=True)
        try:
            before = self.newest_plan(bus, c, 10.0, lambda d: len(d.executors) == len(self.CLUSTER) and bool(homes(d)))
            if before is None:
                v.notes.append("no plan with the three executors and the app's load before the kill")
                v.rehomed_in_s = -1.0
                return
            served = homes(before)
            victim = max(served, key=lambda e: served[e])
            v.homes.append(sorted(served))
            self.killed_for_good = f"executor:{victim}"
            r = self.roles[self.killed_for_good]
            r.proc.send_signal(signal.SIGKILL)
            r.proc.wait(10)
            killed = time.monotonic()
            after = self.newest_plan(bus, c, 60.0, lambda d: victim not in d.executors and bool(homes(d)))
            if after is None:
                v.rehomed_in_s = -1.0
                return
            v.rehomed_in_s = round(time.monotonic() - killed, 1)
            v.homes.append(sorted(homes(after)))
        finally:
            c.close()
            bus.close()

    def inject(self, store: ClickHouseStore, v: Verdict) -> float:
        """Inject the fault; returns when it ended (monotonic)."""
        f = self.fault
        if f.what == "cluster":
            self.kill_serving_executor(v)
        elif f.what == "kill":
            r = self.roles[f.role]
            r.proc.send_signal(signal.SIGKILL)
            r.proc.wait(10)
            self.roles[f.role] = start_role(self.env, f.role, self.args[f.role])
        elif f.what == "stop":
            r = self.roles[f.role]
            r.proc.send_signal(signal.SIGSTOP)
            time.sleep(f.seconds)
            r.proc.send_signal(signal.SIGCONT)
        elif f.what == "broker":
            kill9(self.services.kafka)
            time.sleep(f.seconds)
            self.services.kafka.start()
        elif f.what == "store":
            kill9(self.services.clickhouse)
            time.sleep(f.seconds)
            self.services.clickhouse.start()
        elif f.what == "scheduler-restart":
            # The scheduler has planned many epochs by now (one every 2 s); a new process starts
            # its epochs at 1 again, under a newer generation that executors and workers follow.
            r = self.roles["scheduler"]
            r.proc.send_signal(signal.SIGKILL)
            r.proc.wait(10)
            self.restarted_wall = time.time()
            self.roles["scheduler"] = start_role(self.env, "scheduler", self.args["scheduler"])
        elif f.what == "malformed":
            self.publish_malformed()
        else:
            raise ValueError(f.what)
        return time.monotonic()

    MALFORMED_PER_TOPIC = 20
    READERS = {"frames": 1, "requests": 1, "replies": 1, "rows": 1, "control": 2, "stats": 1, "apps": 1}
    """How many roles read each kind of topic in this deployment (each dead-letters what it cannot read)."""

    def _bus(self) -> Any:
        from vidnexus.connectors.factory import open_bus

        return open_bus(Settings(bus="kafka", kafka_bootstrap=self.services.bootstrap, topic_prefix=self.prefix))

    def publish_malformed(self) -> None:
        """MALFORMED_PER_TOPIC undecodable records on each topic the roles read."""
        from confluent_kafka.admin import AdminClient

        from tests.reliability.malformed_corpus import undecodable
        from vidnexus.contracts.sessions import SessionKey
        from vidnexus.contracts.topics import Topics

        t = Topics(self.prefix)
        listed = AdminClient({"bootstrap.servers": self.services.bootstrap}).list_topics(timeout=10).topics
        replies = sorted(n for n in listed if n.startswith(f"{self.prefix}.replies."))
        assert len(replies) == 1, f"one worker, one reply topic: {replies}"
        targets = {"frames": t.frames, "requests": t.requests(SessionKey.from_arg(SESSION)), "replies": replies[0],
                   "rows": t.rows, "control": t.control, "stats": t.stats, "apps": t.apps}
        bus = self._bus()
        try:
            for source, topic in targets.items():
                for raw in undecodable(source, self.MALFORMED_PER_TOPIC, seed=1):
                    bus.publish(topic, b"plan" if source == "control" else b"malformed", raw)
            bus.flush()
        finally:
            bus.close()

    def read_dead_letters(self, v: Verdict) -> None:
        """Count the dead letters per source (each with its reason, where it was read and by whom)."""
        from vidnexus.contracts.topics import DEAD_LETTER_SOURCES, Topics

        t = Topics(self.prefix)
        v.dead_letters_expected = {s: n * self.MALFORMED_PER_TOPIC for s, n in self.READERS.items()}
        bus = self._bus()
        try:
            for s in DEAD_LETTER_SOURCES:
                bus.create_topic(t.dead_letter(s), 1)
            c = bus.subscribe([t.dead_letter(s) for s in DEAD_LETTER_SOURCES], group=None, from_beginning=True)
            counts: dict[str, int] = {}
            quiet_until = time.monotonic() + 10.0
            while time.monotonic() < quiet_until:
                ms = c.poll(timeout_s=1.0)
                for m in ms:
                    h = dict(m.headers)
                    if not (h.get("reason") and h.get("role") and h.get("topic")):
                        v.notes.append(f"dead letter without reason/role/topic on {m.topic}: {h}")
                        continue
                    source = m.topic.rsplit(".", 1)[1]
                    counts[source] = counts.get(source, 0) + 1
                if ms:
                    quiet_until = time.monotonic() + 3.0
            c.close()
            v.dead_letters = counts
        finally:
            bus.close()

    def accounted(self, store: ClickHouseStore) -> int:
        try:
            return int(store.query(f"SELECT uniqExact(stream, frame_no) FROM vnx_frames WHERE app = '{APP}' "
                                   f"AND stream IN ({self._names_sql()})").scalar())
        except Exception:  # the table appears with the first rows; the store may be coming back
            return -1

    def wait(self, store: ClickHouseStore, v: Verdict, before: int, fault_end: float, deadline_s: float) -> None:
        deadline = time.monotonic() + deadline_s
        recovered = None
        last, still = -1, time.monotonic()
        while time.monotonic() < deadline:
            n = self.accounted(store)
            if recovered is None and n > max(before, 0):
                recovered = time.monotonic() - fault_end
            if n >= v.expected and self.ingest_done(store):
                break
            if n != last:
                last, still = n, time.monotonic()
            elif time.monotonic() - still > 120:
                v.notes.append(f"no progress for 120 s at {n}/{v.expected} accounted")
                break
            time.sleep(1.0)
        v.recovered_in_s = round(recovered, 1) if recovered is not None else -1.0
        time.sleep(3.0)  # let replays land

    def ingest_done(self, store: ClickHouseStore) -> bool:
        try:
            states = dict(store.query(f"SELECT name, state FROM stream_status FINAL WHERE name IN "
                                      f"({self._names_sql()})").rows)
        except Exception:
            return False
        return len(states) == self.n_streams and all(s == "done" for s in states.values())

    def _names_sql(self) -> str:
        return ", ".join(f"'{n}'" for n in self.names)

    def judge(self, store: ClickHouseStore, v: Verdict) -> None:
        names = self._names_sql()
        want = {(n, i) for n in self.names for i in expected_frames(self.seconds)}
        got = {(s, int(f)): st for s, f, st in store.query(
            f"SELECT stream, frame_no, status FROM vnx_frames FINAL WHERE app = '{APP}' AND stream IN ({names})").rows}
        v.accounted = len(set(got) & want)
        v.lost = len(want - set(got))
        v.foreign = len(set(got) - want)
        for st in got.values():
            v.status[st] = v.status.get(st, 0) + 1
        for (reasons,) in store.query(f"SELECT reasons FROM vnx_frames FINAL WHERE app = '{APP}' "
                                      f"AND stream IN ({names}) AND status != 'ok'").rows:
            for part in filter(None, str(reasons).split(",")):  # e.g. early_drop:2,deadline:1
                r, _, n = part.partition(":")
                v.drops[r] = v.drops.get(r, 0) + int(n or 1)
        answered = {(s, int(f)) for s, f in store.query(
            f"SELECT stream, frame_no FROM {TABLE} FINAL WHERE stream IN ({names})").rows}
        v.answered_and_dropped = sum(1 for k in answered if got.get(k, "ok") in ("dropped", "error"))
        v.duplicates = int(store.query(
            f"SELECT count() - uniqExact(stream, frame_no) FROM {TABLE} FINAL WHERE stream IN ({names})").scalar())
        raw = int(store.query(f"SELECT count() FROM vnx_frames WHERE app = '{APP}' AND stream IN ({names})").scalar())
        v.replayed_rows = max(0, raw - len(got))
        for name, sampled, published, rejected, undelivered in store.query(
                f"SELECT name, sampled, published, rejected, undelivered FROM stream_status FINAL "
                f"WHERE name IN ({names})").rows:
            v.unaccounted += int(sampled) - int(published) - int(rejected) - int(undelivered)
            v.undelivered += int(undelivered)
        if self.fault.what == "malformed":
            self.read_dead_letters(v)
        if self.fault.what == "scheduler-restart":
            # Executors and workers follow the restarted scheduler at once, though its epochs
            # start at 1 again (its generation orders them after the old ones).
            # With an epoch every 0.5 s, the old scheduler had planned about 2 × fault_at_s epochs:
            # following only once the new one's count passed the old would take that long again.
            gens = [ln.split("generation ")[1].split(")")[0] for ln in self.roles["scheduler"].log
                    if "scheduler: running (generation" in ln]
            for r in ("executor", "worker"):
                at = [_log_time(ln) for ln in self.roles[r].log if f"scheduler generation {gens[-1]} " in ln]
                if not at or at[0] - self.restarted_wall > 8.0:
                    v.not_following.append(r)
        if v.roles_down:
            for r in v.roles_down:
                v.notes.append(f"{r} exited {self.roles[r].proc.returncode}: "
                               + "".join(self.roles[r].log[-5:]).strip()[-500:])

    def logs(self, n: int = 30) -> str:
        return "\n".join(f"--- {k}\n" + "".join(r.log[-n:]) for k, r in self.roles.items())


# -- the suite -----------------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    cpu = ""
    try:
        cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    except OSError:
        pass
    return {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
            "cpu": cpu}


def services_for_runs(work_dir: Path) -> Iterator[Services]:
    services = Services.start(work_dir)
    try:
        yield services
    finally:
        services.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="python -m tests.reliability.faults")
    p.add_argument("faults", nargs="*", help=f"which faults (default: all): {', '.join(FAULTS)}")
    p.add_argument("--streams", type=int, default=3)
    p.add_argument("--seconds", type=float, default=60.0, help="length of each synthetic stream, ingested at real time")
    p.add_argument("--out", type=Path, help="write the verdicts as JSON here")
    p.add_argument("--work-dir", type=Path, default=Path(".vnx/faults"))
    a = p.parse_args(argv)
    names = a.faults or list(FAULTS)
    unknown = [n for n in names if n not in FAULTS]
    if unknown:
        p.error(f"unknown faults {unknown}; choose from {', '.join(FAULTS)}")
    from vidnexus.training.digits import load_or_train

    load_or_train(Settings().data_dir / "models")
    verdicts = []
    for services in services_for_runs(a.work_dir):
        for n in names:
            v = Run(services, FAULTS[n], streams=a.streams, seconds=a.seconds).execute()
            verdicts.append(v)
            print(f"{n}: {'PASS' if v.ok else 'FAIL'} {json.dumps(asdict(v))}", flush=True)
    doc = {"command": "python -m tests.reliability.faults " + " ".join(argv if argv is not None else sys.argv[1:]),
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine(),
           "runs": [{**asdict(v), "ok": v.ok} for v in verdicts]}
    if a.out:
        a.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if all(v.ok for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
