"""docker-compose.yml cannot run here (no Docker engine), so check it against the code: every
vidnexus command is a real subcommand and every VNX_ variable is a setting the code reads."""

from pathlib import Path

import yaml
from typer.main import get_command

from vidnexus.cli import app
from vidnexus.config import Settings

ROOT = Path(__file__).resolve().parents[2]


def compose():
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def vidnexus_argv(svc):
    entry = svc.get("entrypoint") or []
    cmd = svc.get("command") or []
    argv = list(entry) + list(cmd)
    return argv if argv and argv[0] == "vidnexus" else None


def test_every_vidnexus_service_runs_a_real_subcommand():
    root = get_command(app)
    services = {n: s for n, s in compose()["services"].items() if s.get("image", "").startswith("vidnexus")}
    assert services, "compose defines no vidnexus role"
    for name, svc in services.items():
        argv = vidnexus_argv(svc)
        assert argv, f"service {name} does not run the vidnexus command"
        cmd, args = root, argv[1:]
        while hasattr(cmd, "commands") and args and args[0] in cmd.commands:
            cmd, args = cmd.commands[args[0]], args[1:]
        assert cmd is not root, f"service {name}: {argv[1]!r} is not a vidnexus subcommand"
        assert not hasattr(cmd, "commands"), f"service {name}: {argv} stops at a command group"


def test_every_vnx_variable_is_a_setting():
    fields = {f"VNX_{n.upper()}" for n in Settings.model_fields}
    doc = compose()
    envs = [doc.get("x-vidnexus-env", {})] + [s.get("environment") or {} for s in doc["services"].values()]
    for env in envs:
        for key in env:
            if key.startswith("VNX_"):
                assert key in fields, f"{key} is not read by vidnexus (settings: {sorted(fields)})"


def test_addresses_match_the_exposed_ports():
    doc = compose()
    env = doc["x-vidnexus-env"]
    host, port = env["VNX_KAFKA_BOOTSTRAP"].split(":")
    assert host == "kafka" and f":{port}" in " ".join(doc["services"]["kafka"]["ports"])
    ch = env["VNX_CLICKHOUSE_URL"]
    assert "@clickhouse:9000/" in ch and any(p.endswith(":9000") for p in doc["services"]["clickhouse"]["ports"])


def test_every_service_with_a_server_has_a_healthcheck():
    for name in ("kafka", "clickhouse"):
        assert "healthcheck" in compose()["services"][name]


def test_prometheus_scrapes_every_role_on_its_metrics_port():
    doc = compose()
    prom = yaml.safe_load((ROOT / "deploy" / "monitoring" / "prometheus.yml").read_text())
    targets = [t for job in prom["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    roles = {n for n, s in doc["services"].items() if s.get("image", "").startswith("vidnexus") and not s.get("profiles")
             and (s.get("command") or [None, None])[1] in ("ingest", "executor", "scheduler", "worker", "sink")}
    assert {t.split(":")[0] for t in targets} == roles
    for t in targets:
        host, port = t.split(":")
        env = {**doc["x-vidnexus-env"], **(doc["services"][host].get("environment") or {})}
        assert env.get("VNX_METRICS_PORT") == port, (host, env.get("VNX_METRICS_PORT"))
    for mount in doc["services"]["prometheus"]["volumes"] + doc["services"]["grafana"]["volumes"]:
        assert (ROOT / mount.split(":")[0]).exists(), mount


def test_the_dashboard_uses_documented_metrics():
    import json
    import re

    dash = json.loads((ROOT / "deploy" / "monitoring" / "grafana" / "dashboards" / "vidnexus.json").read_text())
    used = {m for p in dash["panels"] for t in p["targets"] for m in re.findall(r"vnx_\w+", t["expr"])}
    documented = set(re.findall(r"`(vnx_\w+)`", (ROOT / "docs" / "metrics.md").read_text()))
    base = {re.sub(r"_(bucket|sum|count)$", "", m) for m in used}
    assert used and base <= documented, sorted(base - documented)
    assert all(p["datasource"]["uid"] == "prometheus" for p in dash["panels"])
