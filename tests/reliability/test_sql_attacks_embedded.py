"""The SQL attack corpus against the embedded store (chdb): the HTTP endpoint and `vidnexus sql`.

Every query is refused or cut by a limit; no response ever holds the canary; the store is untouched;
the apps' documented queries still answer.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
from pathlib import Path

import pytest

from tests.reliability.sql_attack_harness import TOKEN, call, canary_server, cli_verdict, http_verdict
from tests.reliability.sql_corpus import corpus
from vidnexus.connectors.chdb_store import ChdbStore
from vidnexus.sql_endpoint import AuthBackoff, EndpointLimits, SqlEndpoint
from vidnexus.testing import FakeClock

CORPUS = corpus()
MAX_ROWS = 200
LIMITS = EndpointLimits(max_rows=MAX_ROWS, timeout_s=2, max_memory_bytes=256 << 20)


# chdb runs one engine per process, on one directory: every store of this module is on DATA/chdb
# (the endpoint's, and the one each `vidnexus sql` opens, as a process that serves SQL would).
@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("embedded") / "data"


@pytest.fixture(scope="module")
def canary(tmp_path_factory):
    yield from canary_server(tmp_path_factory.mktemp("canary"))


@pytest.fixture(scope="module")
def endpoint(data_dir):
    store = ChdbStore(data_dir / "chdb")
    store.execute("CREATE TABLE t (a UInt32) ENGINE = MergeTree ORDER BY a")
    store.insert("t", ["a"], [(i,) for i in range(50)])
    ep = SqlEndpoint(store, TOKEN, port=0, limits=LIMITS).start()
    yield ep, store
    ep.stop()
    store.close()


@pytest.fixture(scope="module")
def cli_data_dir(data_dir, endpoint):
    return data_dir


def test_the_canary_is_reachable_without_the_guard(endpoint, canary):
    """The corpus is live: the engine itself would hand the canary out (file and URL)."""
    _, store = endpoint
    assert store.query(f"SELECT * FROM file('{canary.path}', 'LineAsString')").scalar() == canary.token
    assert store.query(f"SELECT * FROM url('{canary.url}', 'LineAsString')").scalar() == canary.token


def test_the_corpus_covers_what_the_issue_asks():
    assert len(CORPUS) >= 60
    cats = {c for c, _ in CORPUS}
    assert {"table function", "write or DDL", "several statements", "settings or format", "system table",
            "exhaustion"} <= cats
    file_spellings = [q for c, q in CORPUS if c == "table function" and re.search(r"file", q, re.I)]
    assert len(file_spellings) >= 6


@pytest.mark.parametrize("category, query", CORPUS, ids=[f"{c}:{q[:50]}" for c, q in CORPUS])
def test_endpoint_refuses_or_cuts(endpoint, canary, category, query):
    ep, store = endpoint
    status, body, _ = call(ep.address, canary.fill(query))
    assert canary.token not in body
    problem = http_verdict(category, status, body, MAX_ROWS)
    assert problem is None, problem
    assert store.query("SELECT count() FROM t").scalar() == 50


@pytest.mark.parametrize("category, query", CORPUS, ids=[f"{c}:{q[:50]}" for c, q in CORPUS])
def test_cli_sql_refuses_or_cuts(cli_data_dir, canary, category, query, capsys, monkeypatch, tmp_path):
    from vidnexus.cli import run

    monkeypatch.setenv("VNX_DATA_DIR", str(cli_data_dir))
    monkeypatch.setenv("VNX_STORE", "chdb")
    monkeypatch.chdir(tmp_path)  # a file written to the current directory would show up here
    rc = run(["sql", canary.fill(query), "--max-rows", str(MAX_ROWS), "--timeout", "2"])
    out, err = capsys.readouterr()
    assert canary.token not in out + err
    problem = cli_verdict(category, rc, out, err)
    assert problem is None, problem
    assert list(tmp_path.iterdir()) == []


def test_the_store_is_untouched_after_the_corpus(endpoint):
    _, store = endpoint
    assert store.query("SELECT count() FROM t").scalar() == 50
    assert store.query("SELECT name FROM system.databases WHERE name = 'evil'").rows == []
    assert store.query("SELECT name FROM system.tables WHERE database = 'default'").rows == [("t",)]


def test_oversized_and_deeply_nested_queries(endpoint):
    ep, _ = endpoint
    status, body, _ = call(ep.address, "SELECT 1" + " " * 200_000)
    assert status == 413
    status, body, _ = call(ep.address, "SELECT " + "(" * 5000 + "1" + ")" * 5000)
    assert status == 403 and "not a valid query" in body


# -- the apps' documented queries still answer --------------------------------------------------
def _documented_queries() -> list[tuple[str, str]]:
    from vidnexus.apps import APP_REFS

    out = []
    for name, ref in APP_REFS.items():
        demo = importlib.import_module(ref.split(":")[0]).DEMO
        out += [(f"{name}: {title}", sql) for title, sql in demo.queries.items()]
    reads = re.compile(r"(SELECT|WITH|SHOW|DESCRIBE|EXISTS|EXPLAIN)\b", re.I)
    for doc in sorted(Path("docs").glob("*.md")) + [Path("README.md")]:
        for block in re.findall(r"```sql\n(.*?)```", doc.read_text(), re.S):
            # The queries a reader would send (administration snippets, e.g. creating the reader
            # user on one's own server, are not for the endpoint).
            for stmt in (s.strip() for s in block.split(";\n")):
                if reads.match(stmt):
                    out.append((f"{doc.name}: {stmt[:40]}", stmt.rstrip(";")))
    return out


@pytest.fixture(scope="module")
def app_tables(endpoint):
    """The apps' tables and vnx_frames, created after the corpus ran (tests run in file order)."""
    from vidnexus.apps import APP_REFS
    from vidnexus.connectors.store import ensure_table
    from vidnexus.apps import load_app
    from vidnexus.operators.engine import FRAMES_TABLE

    ep, store = endpoint
    ensure_table(store, FRAMES_TABLE)
    for ref in APP_REFS.values():
        for table in load_app(ref).tables.values():
            ensure_table(store, table.schema())
    return ep


@pytest.mark.parametrize("title, sql", _documented_queries(), ids=lambda v: v[:40])
def test_documented_queries_still_answer(app_tables, title, sql):
    status, body, _ = call(app_tables.address, sql)
    assert status == 200, f"{title}: {body[:300]}"


# -- the token ---------------------------------------------------------------------------------
def test_repeated_wrong_tokens_back_off_and_the_token_is_never_logged(endpoint, caplog):
    _, store = endpoint
    clock = FakeClock()
    ep = SqlEndpoint(store, TOKEN, port=0, clock=clock, backoff=AuthBackoff(free_failures=3, max_block_s=60)).start()
    caplog.set_level(logging.DEBUG)
    try:
        assert call(ep.address, "SELECT 1")[0] == 200
        for _ in range(3):
            assert call(ep.address, "SELECT 1", token="wrong-wrong-wrong-wrong")[0] == 401
        assert call(ep.address, "SELECT 1", token="wrong-wrong-wrong-wrong")[0] == 401  # 4th: blocks 1 s
        status, body, headers = call(ep.address, "SELECT 1")  # even the right token waits
        assert status == 429 and headers.get("Retry-After") == "1"
        clock.advance(1.5)
        assert call(ep.address, "SELECT 1")[0] == 200  # and a success clears the count
        assert call(ep.address, "SELECT 1", token="wrong-wrong-wrong-wrong")[0] == 401
        assert call(ep.address, "SELECT 1")[0] == 200
    finally:
        ep.stop()
    logged = "\n".join(f"{r.getMessage()} {r.args}" for r in caplog.records)
    assert caplog.records and TOKEN not in logged


def test_allow_listed_names_exist_in_the_engine(endpoint):
    """A typo in the allow-list would allow nothing; a name that exists in no form is a mistake."""
    from vidnexus.sql_allowlist import AGGREGATES, SCALARS, SYNTAX_ONLY, TABLE_FUNCTIONS

    _, store = endpoint
    names = {str(r[0]).lower() for r in store.query("SELECT name FROM system.functions").rows}
    tables = {str(r[0]).lower() for r in store.query("SELECT name FROM system.table_functions").rows}
    assert sorted((SCALARS | AGGREGATES) - names) == sorted(SYNTAX_ONLY)
    assert TABLE_FUNCTIONS <= tables


def test_generated_token_file_is_private(tmp_path):
    """`sql-server` without a token writes a generated one to a 0600 file and says where, never the
    token itself."""
    import stat
    import subprocess
    import sys
    import time

    env = {**os.environ, "VNX_DATA_DIR": str(tmp_path / "data"), "VNX_STORE": "chdb"}
    env.pop("VNX_SQL_TOKEN", None)
    path = tmp_path / "data" / "sql-token"
    proc = subprocess.Popen([sys.executable, "-m", "vidnexus", "sql-server", "--port", "0"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (path.exists() and path.read_text().strip()) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        token = path.read_text().strip()
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert len(token) >= 16 and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert str(path) in err and token not in out + err
