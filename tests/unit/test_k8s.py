"""deploy/k8s cannot run here (no cluster), so check it offline (issue 23 item 3): every resource
against the Kubernetes API schemas (kubernetes-validate, strict: unknown fields fail), every
command and option against the CLI, every VNX_ variable against the settings, every probe and
metrics port against what the roles serve, the autoscalers' metrics against what the code exports,
and the operators' resources against what the roles' addresses name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.main import get_command

from vidnexus.cli import app
from vidnexus.config import Settings
from vidnexus.contracts.topics import Topics

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
KUBERNETES = "1.31"
OPERATOR_KINDS = {("kafka.strimzi.io/v1beta2", "Kafka"), ("kafka.strimzi.io/v1beta2", "KafkaNodePool"),
                  ("clickhouse.altinity.com/v1", "ClickHouseInstallation")}


def render(folder: Path) -> list[dict]:
    """The resources of a kustomization (plain resources: the files it lists, its namespace set on
    the namespaced ones, its image tags applied), as ``kubectl kustomize`` renders them."""
    k = yaml.safe_load((folder / "kustomization.yaml").read_text())
    assert k["kind"] == "Kustomization"
    tags = {i["name"]: i["newTag"] for i in k.get("images", [])}
    out = []
    for f in k["resources"]:
        for doc in yaml.safe_load_all((folder / f).read_text()):
            if doc is None:
                continue
            if doc["kind"] != "Namespace" and k.get("namespace"):
                doc["metadata"]["namespace"] = k["namespace"]
            for c in _containers(doc):
                if c["image"] in tags:
                    c["image"] = f"{c['image']}:{tags[c['image']]}"
            out.append(doc)
    listed = {f for f in k["resources"]}
    on_disk = {p.name for p in folder.glob("*.yaml") if p.name != "kustomization.yaml"}
    assert listed == on_disk, f"{folder}: files not in the kustomization, or missing: {listed ^ on_disk}"
    return out


def _containers(doc: dict) -> list[dict]:
    if doc["kind"] != "Deployment":
        return []
    return doc["spec"]["template"]["spec"]["containers"]


ROLES = render(K8S)
SERVICES = render(K8S / "services")


def test_every_resource_validates_against_the_kubernetes_schemas():
    import kubernetes_validate

    kinds = set()
    for doc in ROLES:
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)
        kinds.add(doc["kind"])
    assert {"Namespace", "ConfigMap", "PersistentVolumeClaim", "Deployment", "Service",
            "HorizontalPodAutoscaler"} <= kinds


def test_a_broken_resource_fails_validation():
    """The validator is strict: a misspelt field and a wrong type are errors (so the test above
    can fail)."""
    import copy

    import kubernetes_validate

    dep = copy.deepcopy(next(d for d in ROLES if d["kind"] == "Deployment"))
    dep["spec"]["replica"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, KUBERNETES, strict=True)
    dep = copy.deepcopy(next(d for d in ROLES if d["kind"] == "Deployment"))
    dep["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "eighty"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, KUBERNETES, strict=True)


def _command(argv: list[str]):
    root = cmd = get_command(app)
    args = argv[1:]
    while hasattr(cmd, "commands") and args and args[0] in cmd.commands:
        cmd, args = cmd.commands[args[0]], args[1:]
    assert cmd is not root and not hasattr(cmd, "commands"), f"{argv}: not a vidnexus command"
    return cmd


def test_every_role_runs_a_real_command_with_real_options():
    deployments = [d for d in ROLES if d["kind"] == "Deployment"]
    roles = {c["command"][1] for d in deployments for c in _containers(d)}
    assert roles == {"ingest", "executor", "scheduler", "worker", "sink", "sql-server"}
    for d in deployments:
        for c in _containers(d):
            argv = list(c["command"]) + list(c.get("args") or [])
            assert argv[0] == "vidnexus", argv
            cmd = _command(argv)
            known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
            for a in argv[2:]:
                if a.startswith("--"):
                    assert a in known, f"{d['metadata']['name']}: {a} is not an option of `vidnexus {argv[1]}`"


def test_every_vnx_variable_is_a_setting():
    fields = {f"VNX_{n.upper()}" for n in Settings.model_fields}
    names = []
    for d in ROLES:
        if d["kind"] == "ConfigMap":
            names += list(d["data"])
        for c in _containers(d):
            names += [e["name"] for e in c.get("env") or []]
    assert names
    for n in names:
        assert n in fields, f"{n} is not read by vidnexus (settings: {sorted(fields)})"


def _env(c: dict) -> dict[str, str]:
    env = {}
    for src in c.get("envFrom") or []:
        cm = next(d for d in ROLES if d["kind"] == "ConfigMap" and d["metadata"]["name"] == src["configMapRef"]["name"])
        env.update(cm["data"])
    env.update({e["name"]: e.get("value", "<from secret>") for e in c.get("env") or []})
    return env


def test_probes_and_metrics_are_on_the_ports_the_roles_serve():
    for d in (d for d in ROLES if d["kind"] == "Deployment"):
        for c in _containers(d):
            env, argv = _env(c), list(c["command"])
            ports = {p["name"]: p["containerPort"] for p in c["ports"]}
            if argv[1] == "sql-server":
                served = int(argv[argv.index("--port") + 1])
                assert argv[argv.index("--host") + 1] == "0.0.0.0"
                assert env.get("VNX_SQL_TOKEN") == "<from secret>"
            else:
                served = int(env["VNX_HEALTH_PORT"])
                assert env["VNX_METRICS_HOST"] == "0.0.0.0"  # the health server binds there too
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                if probe in c:
                    port = c[probe]["httpGet"]["port"]
                    assert c[probe]["httpGet"]["path"] == "/health"
                    assert ports.get(port, port) == served, (d["metadata"]["name"], probe)
            assert "livenessProbe" in c and "readinessProbe" in c and c["resources"]["requests"]
            if "metrics" in ports:
                assert int(env["VNX_METRICS_PORT"]) == ports["metrics"]
                annotations = d["spec"]["template"]["metadata"]["annotations"]
                assert annotations["prometheus.io/port"] == str(ports["metrics"])


def test_autoscalers_follow_metrics_the_code_exports():
    hpas = {d["metadata"]["name"]: d for d in ROLES if d["kind"] == "HorizontalPodAutoscaler"}
    deployments = {d["metadata"]["name"]: d for d in ROLES if d["kind"] == "Deployment"}
    assert set(hpas) == {"vidnexus-worker", "vidnexus-executor"}
    for h in hpas.values():
        assert h["spec"]["scaleTargetRef"]["name"] in deployments
    # The executors follow the scheduler's wanted devices, a metric the scheduler command exports.
    code = (ROOT / "vidnexus" / "roles" / "metrics.py").read_text()
    metric = hpas["vidnexus-executor"]["spec"]["metrics"][0]["external"]["metric"]["name"]
    assert f'"{metric}"' in code
    sched = next(c for c in _containers(deployments["vidnexus-scheduler"]))
    assert "VNX_METRICS_PORT" in _env(sched)
    # The workers follow their consumer group's lag: the group the worker of that app joins.
    worker = next(c for c in _containers(deployments["vidnexus-worker"]))
    ext = hpas["vidnexus-worker"]["spec"]["metrics"][0]["external"]["metric"]
    assert ext["name"] == "kafka_consumergroup_lag"
    from vidnexus.apps import load_app

    app_name = load_app(worker["command"][2]).name
    group = Topics(_env(worker)["VNX_TOPIC_PREFIX"]).group(f"app-{app_name}")
    assert ext["selector"]["matchLabels"]["consumergroup"] == group
    assert hpas["vidnexus-worker"]["spec"]["maxReplicas"] <= 8  # the frames topic's partitions (worker --partitions)


def test_the_services_are_operator_resources_at_the_addresses_the_roles_use():
    assert {(d["apiVersion"], d["kind"]) for d in SERVICES} == OPERATOR_KINDS
    env = next(d for d in ROLES if d["kind"] == "ConfigMap")["data"]
    kafka = next(d for d in SERVICES if d["kind"] == "Kafka")
    # Strimzi names the bootstrap service <cluster>-kafka-bootstrap; the listener is on 9092.
    host, port = env["VNX_KAFKA_BOOTSTRAP"].rsplit(":", 1)
    assert host.split(".")[0] == f"{kafka['metadata']['name']}-kafka-bootstrap"
    assert int(port) in {lst["port"] for lst in kafka["spec"]["kafka"]["listeners"]}
    assert kafka["spec"]["kafka"]["config"]["message.max.bytes"] >= 16 * 1024 * 1024
    assert "kafkaExporter" in kafka["spec"]  # the lag the workers' autoscaler reads
    pool = next(d for d in SERVICES if d["kind"] == "KafkaNodePool")
    assert pool["metadata"]["labels"]["strimzi.io/cluster"] == kafka["metadata"]["name"]
    # The Altinity operator names the service clickhouse-<installation>.
    chi = next(d for d in SERVICES if d["kind"] == "ClickHouseInstallation")
    m = re.search(r"@([^:/]+):(\d+)/", env["VNX_CLICKHOUSE_URL"])
    assert m and m.group(1).split(".")[0] == f"clickhouse-{chi['metadata']['name']}" and m.group(2) == "9000"
