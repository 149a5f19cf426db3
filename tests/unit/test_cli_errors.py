"""Every CLI mistake is one line on stderr and exit code 2, never a traceback (issue 28).

The walk covers every command of `vidnexus` and every option: a missing required argument, an
unknown option, a value of the wrong type, out of range, infinite or NaN, a value given to a flag;
then a table of semantic mistakes (valid types, invalid meaning) that each command must catch.
"""

from __future__ import annotations

import pytest
import typer

from vidnexus import cli

# Valid values for the required parameters, so that the walk reaches the option under test.
REQUIRED = {"query": ["SELECT 1"], "name": ["x"], "app_ref": ["hud"], "url": ["synthetic://hud"],
            "session": ["-s", "resnet18:100"], "source": ["--from", "zoo:resnet18"],
            "input_shape": ["--input", "3x32x32"]}


def _leaves(cmd, path=()):
    subs = getattr(cmd, "commands", None)
    if subs:
        for name, sub in sorted(subs.items()):
            yield from _leaves(sub, (*path, name))
    else:
        yield path, cmd


def _required_args(cmd) -> list[str]:
    args: list[str] = []
    for p in cmd.params:
        if p.required:
            args += REQUIRED[p.name]
    return args


def _bad_values(p) -> list[str]:
    kind = p.bare_type()  # the annotation's name: 'int', 'float', 'str', 'bool', 'Path'
    if getattr(p, "is_flag", False):
        return []
    vals = []
    if kind in ("int", "float"):
        vals.append("abc")
        if p.min is not None:
            vals.append(str(p.min - 1))
        if p.max is not None:
            vals.append(str(p.max + 1))
    if kind == "float":
        vals += ["inf", "nan", "-inf"]
    return vals


def _cases() -> list[tuple[str, list[str]]]:
    root = typer.main.get_command(cli.app)
    cases: list[tuple[str, list[str]]] = []
    for path, cmd in _leaves(root):
        name = " ".join(path)
        params = [p for p in cmd.params if p.name != "help"]
        if any(p.required for p in params):
            cases.append((f"{name}: missing arguments", list(path)))
        cases.append((f"{name}: unknown option", [*path, *_required_args(cmd), "--no-such-option"]))
        for p in params:
            if p.param_type_name != "option":
                continue
            opt = p.opts[0]
            if getattr(p, "is_flag", False):
                cases.append((f"{name} {opt}=value", [*path, *_required_args(cmd), f"{opt}=maybe"]))
            for v in _bad_values(p):
                args = [a for a in _required_args(cmd)]
                cases.append((f"{name} {opt} {v}", [*path, *args, opt, v]))
    cases.append(("unknown command", ["no-such-command"]))
    cases.append(("unknown subcommand", ["streams", "no-such-command"]))
    return cases


# Valid types, invalid meaning: each command must say so in one line.
SEMANTIC = [
    ["sql", "SELECT 1", "--format", "xml"],
    ["sql", ""],
    ["sql", "SELECT 1", "--store", "postgres"],
    ["ingest", "--shard", "1/1"],
    ["ingest", "--shard", "0/0"],
    ["ingest", "--shard", "3/2"],
    ["ingest", "--shard", "x"],
    ["ingest", "--shard", "-1/2"],
    ["executor", "-s", "resnet18:100", "--policy", "nope"],
    ["executor", "-s", "nope"],
    ["executor", "-s", "resnet18:abc"],
    ["executor", "-s", "resnet18:100", "--weights", "x"],
    ["executor", "-s", "resnet18:100", "--layerwise", "resnet18:0"],
    ["executor", "-s", "resnet18:100", "--layerwise", ":3"],
    ["bench", "nope"],
    ["demo", "nope"],
    ["models", "register", "m", "--from", "zoo:resnet18", "--input", "3xa"],
    ["models", "show", "nope"],
    ["models", "profile", "nope"],
    ["services", "up", "--only", "nope"],
    ["sql-server", "--token", "short"],
    ["worker", "hud"],  # VNX_BUS=memory: a distributed role refuses to start
    ["executor", "-s", "resnet18:100"],
    ["scheduler"],
    ["sink"],
    ["ingest"],
    ["scheduler", "--epoch", "5", "--min-epoch", "10"],
    ["worker", "no_such_module:app"],
    ["worker", "hud", "--runtime", "spark"],
    ["up", "hud"],  # VNX_BUS=memory: the roles it starts are distributed
    ["up", "hud", "--runtime", "spark"],
    ["up", "hud", "--once", "--no-ingest"],  # --once ingests itself
    ["ingest", "--wait"],  # --wait needs --once and --app
    ["ingest", "--once", "--wait"],
    ["run", "no_such_module:app"],
    ["run", "hud"],  # no --stream and no registered stream feeds hud
    ["run", "hud", "--stream", "synthetic://hud", "--save", "/no/such/folder/run.json"],  # before the run
    ["demo", "hud", "--save", "/no/such/folder/demo.json"],  # before training or running anything
    ["demo", "hud", "--save", "/"],  # a folder
    ["streams", "add", "cam", "synthetic://hud", "--app", "nope"],
    ["streams", "add", "cam", "synthetic://hud", "--until", "0"],
    ["streams", "add", "cam", "synthetic://hud", "--tag", "bad"],
    ["streams", "add", "cam", "synthetic://hud", "--tag", "line.gate=1,1,1,1"],  # a line of one point
    ["run", "traffic", "--stream", "synthetic://traffic", "--tag", "line.gate=0,216,768"],
    ["streams", "add", "bad name!", "synthetic://hud"],
    ["streams", "add", "cam", "synthetic://hud", "--rate", "fast"],
    ["streams", "add", "cam", "synthetic://hud", "--rate", "0"],
    ["run", "hud", "--stream", "synthetic://hud", "--rate", "-2"],
    ["streams", "add", "cam", ""],
    ["streams", "add", "cam", "ftp://example.com/x.mp4"],
    ["streams", "add", "cam", "synthetic://hud?fps=inf"],
    ["streams", "add", "cam", "synthetic://hud?fps=nan"],
    ["streams", "add", "cam", "synthetic://hud?seconds=1e400"],
    ["streams", "add", "cam", "synthetic://hud", "--fps", "2", "--every-n", "3"],
    ["streams", "add", "cam", "synthetic://hud", "--fps", "2", "--keyframes"],
    ["streams", "add", "cam", "/no/such/file.mp4"],
    ["streams", "show", "nope"],
    ["streams", "pause", "nope"],
    ["streams", "remove", "nope"],
    ["streams", "tags", "nope", "--tag", "zone.bay=0,0,10,0,10,10"],
    ["streams", "add", "cam", "synthetic://hud", "--tag", "zone.bay=0,0,10,10"],  # two points are no zone
]


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("VNX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("VNX_WORK_DIR", str(tmp_path / "work"))
    monkeypatch.setenv("VNX_BUS", "memory")
    monkeypatch.setenv("VNX_STORE", "chdb")
    monkeypatch.delenv("VNX_DEBUG", raising=False)
    return tmp_path


def _one_line_error(capsys, rc: int) -> str | None:
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if rc != 2 or len(lines) != 1 or not lines[0].startswith("error: ") or "Traceback" in err:
        return f"exit {rc}, stderr {err[-600:]!r}"
    if "embedded store" in err:  # a store left open by an earlier command would mask the real error
        return f"the store, not the input: {err!r}"
    return None


CASES = _cases()


@pytest.mark.parametrize("args", [a for _, a in CASES], ids=[n for n, _ in CASES])
def test_usage_errors_are_one_line(isolated, capsys, args):
    problem = _one_line_error(capsys, cli.run(args))
    assert problem is None, problem


@pytest.mark.parametrize("args", SEMANTIC, ids=[" ".join(a)[:60] for a in SEMANTIC])
def test_semantic_errors_are_one_line(isolated, capsys, args):
    problem = _one_line_error(capsys, cli.run(args))
    assert problem is None, problem


def test_the_walk_covers_every_command_and_option():
    root = typer.main.get_command(cli.app)
    names = {n.split(":")[0].split(" --")[0] for n, _ in CASES}
    leaves = {" ".join(p) for p, _ in _leaves(root)}
    assert leaves <= {n.split(" -")[0] for n in names}
    assert len(CASES) > 100


def test_debug_shows_the_traceback(isolated, capsys):
    with pytest.raises(Exception):
        cli.run(["--debug", "ingest", "--shard", "x"])
    with pytest.raises(Exception):
        cli.run(["ingest", "--shard", "x", "--debug"])
