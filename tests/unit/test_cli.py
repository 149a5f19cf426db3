"""User errors give a one-line reason and a non-zero exit, quickly (no hang, no traceback wall)."""

import os
import subprocess
import sys
import time

import pytest

from vidnexus.connectors.clickhouse_store import ClickHouseStore
from vidnexus.errors import ConnectorError


def vnx(*args, env=None, timeout=60):
    e = dict(os.environ, **(env or {}))
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "vidnexus", *args], capture_output=True, text=True,
                       env=e, timeout=timeout)
    return p, time.monotonic() - t0


def test_wrong_clickhouse_url_is_a_clear_error_within_seconds():
    p, took = vnx("sql", "SELECT 1", env={"VNX_STORE": "clickhouse",
                                          "VNX_CLICKHOUSE_URL": "clickhouse://default:@127.0.0.1:1/default",
                                          "VNX_CONNECT_TIMEOUT_S": "2"})
    assert p.returncode == 2
    assert "not reachable" in p.stderr and "127.0.0.1:1" in p.stderr
    assert "Traceback" not in p.stderr
    assert took < 15


def test_bad_setting_names_the_variable():
    p, _ = vnx("sql", "SELECT 1", env={"VNX_STORE": "postgres"})
    assert p.returncode == 2 and "VNX_STORE" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("driver", ["confluent", "kafka-python"])
def test_wrong_broker_address_fails_fast(driver):
    from vidnexus.config import Settings
    from vidnexus.connectors.factory import open_bus

    t0 = time.monotonic()
    with pytest.raises(ConnectorError, match=r"Kafka at '127.0.0.1:1' is not reachable \(.+\)") as e:
        open_bus(Settings(bus="kafka", kafka_driver=driver, kafka_bootstrap="127.0.0.1:1", connect_timeout_s=2.0))
    assert e.value.retryable
    assert time.monotonic() - t0 < 10


def test_wrong_clickhouse_port_fails_fast_in_the_api():
    t0 = time.monotonic()
    with pytest.raises(ConnectorError, match="not reachable") as e:
        ClickHouseStore("clickhouse://default:@127.0.0.1:1/default", timeout_s=2.0)
    assert e.value.retryable
    assert time.monotonic() - t0 < 10


def test_help_lists_the_commands():
    p, _ = vnx("--help")
    assert p.returncode == 0
    for cmd in ("services", "demo", "sql", "models", "bench"):
        assert cmd in p.stdout


def test_bench_help_names_every_benchmark():
    from vidnexus.benchmarks import BENCHMARKS

    p, _ = vnx("bench", "--help", env={"COLUMNS": "400"})
    assert p.returncode == 0
    named = p.stdout.split("Benchmark:", 1)[1].split("(", 1)[0]
    assert [n.strip() for n in named.split(",")] == list(BENCHMARKS)


def test_unknown_benchmark_and_demo():
    p, _ = vnx("bench", "nope")
    assert p.returncode == 2 and "available" in p.stderr
    p, _ = vnx("demo", "nope")
    assert p.returncode == 2 and "unknown demo" in p.stderr


def test_sql_on_the_embedded_store(tmp_path):
    p, _ = vnx("sql", "SELECT 1 + 1 AS two", "--format", "csv", env={"VNX_DATA_DIR": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["two", "2"]


def test_invalid_sql_is_a_clear_error(tmp_path):
    p, _ = vnx("sql", "SELEC nonsense", env={"VNX_DATA_DIR": str(tmp_path)})
    assert p.returncode == 2 and "query failed" in p.stderr and "Traceback" not in p.stderr


def test_exit_codes_from_commands_reach_the_shell(tmp_path):
    p, _ = vnx("services", "status", env={"VNX_WORK_DIR": str(tmp_path), "VNX_KAFKA_PORT": "1",
                                          "VNX_CLICKHOUSE_TCP_PORT": "2"})
    assert p.returncode == 1 and "kafka: stopped" in p.stdout


def test_executor_app_sessions_are_the_ones_its_workers_start_with():
    """`vidnexus executor --app APP[@SLO_MS]`: no session typed by hand; the app's SLO split evenly
    over its DNN depth, as RemoteBackend sends before the scheduler's split."""
    import pytest

    from vidnexus.apps import load_app
    from vidnexus.cli.roles import _app_sessions
    from vidnexus.errors import VidnexusError
    from vidnexus.operators.infer import session_of, stage_slos

    hud = load_app("hud")
    assert [str(k) for k in _app_sessions("hud")] == [session_of(m, stage_slos(hud)) for m in stage_slos(hud)]
    assert [str(k) for k in _app_sessions("hud@1000")] == ["hud_digits-1000ms"]
    game = _app_sessions("game@900")  # three sequential DNN stages: 300 ms each
    assert game and {k.slo_ms for k in game} == {300.0}
    for bad in ("hud@x", "hud@0", "hud@nan"):
        with pytest.raises(VidnexusError, match="SLO after @"):
            _app_sessions(bad)


def test_streams_tags_changes_lines_and_zones_in_place(tmp_path):
    env = {"VNX_DATA_DIR": str(tmp_path / "data"), "VNX_BUS": "memory", "VNX_STORE": "chdb"}
    p, _ = vnx("streams", "add", "cam", "synthetic://hud?fps=5&seconds=1", "--no-probe", "--tag", "site=a",
               "--tag", "line.old=0,1,2,3", env=env)
    assert p.returncode == 0, p.stderr
    p, _ = vnx("streams", "tags", "cam", "--tag", "zone.bay=0,0,10,0,10,10", "--remove", "line.old", env=env)
    assert p.returncode == 0, p.stderr
    assert "cam: site=a, zone.bay=0,0,10,0,10,10" in p.stdout
    p, _ = vnx("streams", "tags", "cam", "--remove", "line.old", env=env)
    assert p.returncode == 2 and "no tag line.old" in p.stderr
    p, _ = vnx("streams", "tags", "cam", "--tag", "zone.bay=0,0,10,0", env=env)
    assert p.returncode == 2 and "zone.bay" in p.stderr
    p, _ = vnx("streams", "show", "cam", env=env)
    assert "zone.bay" in p.stdout and "line.old" not in p.stdout

