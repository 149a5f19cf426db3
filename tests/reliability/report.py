"""The reliability suite's own JSON (issue 19): every pytest session that runs any of its tests —
the fault runs, the bad-media corpus, the SQL attack corpus — writes a summary of what was tried
and what held, from the tests' outcomes and the verdicts they attach (``record_property``):

    faults_survived / faults_tried, bad_inputs_isolated / bad_inputs_tried,
    attacks_refused / attacks_tried, malformed_dead_lettered / malformed_published,
    frames_lost (must be 0), duplicate_rows (must be 0)

to ``$VNX_RELIABILITY_JSON``, else ``$VNX_WORK_DIR/reliability.json`` (``make test`` leaves it in
``.vnx/test/``). The figures in docs/reliability.md come from a committed run of the suite alone:

    VNX_FAULTS=all VNX_RELIABILITY_JSON=bench/results/reliability-DATE.json \\
        python -m pytest tests/reliability tests/unit/streams/test_bad_media_corpus.py \\
        tests/integration/test_sql_guard_server.py

Registered as a plugin by tests/conftest.py.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ATTACK_TESTS = ("test_endpoint_refuses_or_cuts", "test_cli_sql_refuses_or_cuts", "test_cli_sql_refuses")


class Tally:
    def __init__(self) -> None:
        self.faults: list[dict[str, Any]] = []
        self.attacks: dict[str, list[int]] = {}  # test file::function → [refused, tried]
        self.bad_inputs: list[dict[str, Any]] = []

    def add(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        name = report.nodeid.split("::")[-1].split("[")[0]
        if "verdict" in props:
            self.faults.append({**props["verdict"], "passed": report.passed})
        elif "bad_inputs" in props:
            self.bad_inputs.append({**props["bad_inputs"], "passed": report.passed})
        elif name == "test_the_pipeline_survives":  # the run itself failed: no verdict
            self.faults.append({"fault": report.nodeid, "passed": False, "ok": False, "lost": 0, "duplicates": 0,
                                "expected": 0})
        elif name in ATTACK_TESTS:
            where = report.nodeid.split("::")[0].rsplit("/", 1)[-1] + "::" + name
            counts = self.attacks.setdefault(where, [0, 0])
            counts[0] += report.passed
            counts[1] += 1

    def empty(self) -> bool:
        return not (self.faults or self.attacks or self.bad_inputs)

    def document(self) -> dict[str, Any]:
        malformed = [f for f in self.faults if f.get("dead_letters_expected")]
        summary = {
            "faults_survived": sum(1 for f in self.faults if f["passed"] and f.get("ok")),
            "faults_tried": len(self.faults),
            "bad_inputs_isolated": sum(b["isolated"] for b in self.bad_inputs),
            "bad_inputs_tried": sum(b["tried"] for b in self.bad_inputs),
            "valid_inputs_ok": sum(b["valid_ok"] for b in self.bad_inputs),
            "valid_inputs_tried": sum(b["valid_tried"] for b in self.bad_inputs),
            "attacks_refused": sum(r for r, _ in self.attacks.values()),
            "attacks_tried": sum(n for _, n in self.attacks.values()),
            "malformed_dead_lettered": sum(min(f["dead_letters"].get(s, 0), n) for f in malformed
                                           for s, n in f["dead_letters_expected"].items()),
            "malformed_published": sum(sum(f["dead_letters_expected"].values()) for f in malformed),
            "frames_lost": sum(f["lost"] for f in self.faults),
            "duplicate_rows": sum(f["duplicates"] for f in self.faults),
            "frames_expected": sum(f["expected"] for f in self.faults),
        }
        env = [f"{k}={os.environ[k]}" for k in ("VNX_FAULTS", "VNX_RELIABILITY_JSON") if os.environ.get(k)]
        return {"name": "reliability", "command": " ".join([*env, "python -m pytest", *sys.argv[1:]]),
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": _commit(),
                "machine": {"platform": platform.platform(), "python": platform.python_version(),
                            "cpus": os.cpu_count()},
                "summary": summary,
                "results": {"faults": self.faults, "attacks": {k: {"refused": r, "tried": n}
                                                               for k, (r, n) in sorted(self.attacks.items())},
                            "bad_inputs": self.bad_inputs}}


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


_TALLY = Tally()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or (report.when == "setup" and report.failed):
        _TALLY.add(report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _TALLY.empty():
        return
    path = Path(os.environ.get("VNX_RELIABILITY_JSON")
                or Path(os.environ.get("VNX_WORK_DIR", ".vnx")) / "reliability.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = _TALLY.document()
    path.write_text(json.dumps(doc, indent=1) + "\n")
    s = doc["summary"]
    session.config.get_terminal_writer().line()
    session.config.get_terminal_writer().line(
        f"reliability: faults {s['faults_survived']}/{s['faults_tried']}, bad inputs "
        f"{s['bad_inputs_isolated']}/{s['bad_inputs_tried']}, attacks {s['attacks_refused']}/{s['attacks_tried']}, "
        f"malformed records {s['malformed_dead_lettered']}/{s['malformed_published']}, frames lost "
        f"{s['frames_lost']}, duplicate rows {s['duplicate_rows']} → {path}")
