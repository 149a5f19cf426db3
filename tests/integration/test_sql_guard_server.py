"""The SQL attack corpus against the ClickHouse server (18.16) as the read-only user `vnx_reader`
that `vidnexus services up` creates: the endpoint and `vidnexus sql --store clickhouse`.

Two lines of defence: the guard refuses (403 / exit 2), and the reader's profile (readonly=1,
database `default` only) would refuse writes, DDL and every table function in the engine itself.
"""

from __future__ import annotations

import importlib
import json

import pytest

from tests.reliability.sql_attack_harness import TOKEN, call, canary_server, cli_verdict, http_verdict
from tests.reliability.sql_corpus import corpus
from vidnexus.connectors.clickhouse_store import ClickHouseStore, reader_url
from vidnexus.errors import ConnectorError
from vidnexus.sql_endpoint import EndpointLimits, SqlEndpoint

CORPUS = corpus()
MAX_ROWS = 200


@pytest.fixture(scope="module")
def canary(tmp_path_factory):
    yield from canary_server(tmp_path_factory.mktemp("canary"))


@pytest.fixture(scope="module")
def owner(clickhouse_url):
    store = ClickHouseStore(clickhouse_url)
    store.execute("DROP TABLE IF EXISTS t")
    store.execute("CREATE TABLE t (a UInt32) ENGINE = MergeTree ORDER BY a")
    store.insert("t", ["a"], [(i,) for i in range(50)])
    yield store
    store.execute("DROP TABLE IF EXISTS t")
    store.close()


@pytest.fixture(scope="module")
def endpoint(owner, clickhouse_url):
    reader = ClickHouseStore(reader_url(clickhouse_url))
    ep = SqlEndpoint(reader, TOKEN, port=0, limits=EndpointLimits(max_rows=MAX_ROWS, timeout_s=5)).start()
    yield ep
    ep.stop()
    reader.close()


def test_the_reader_cannot_reach_outside_or_write_even_without_the_guard(owner, clickhouse_url, canary):
    leak = f"SELECT * FROM url('{canary.url}', 'TSV', 'x String')"
    assert owner.query(leak).scalar() == canary.token  # live: the owner's user would read it
    reader = ClickHouseStore(reader_url(clickhouse_url))
    try:
        assert reader.query("SELECT count() FROM t").scalar() == 50
        for sql in (leak, "SELECT * FROM remote('127.0.0.1:19000', system.one)", "SELECT * FROM numbers(3)"):
            with pytest.raises(ConnectorError, match="readonly mode"):
                reader.query(sql)
        for sql in ("INSERT INTO t SELECT 1", "DROP TABLE t", "CREATE TABLE x (a UInt8) ENGINE = Memory"):
            with pytest.raises(ConnectorError, match="readonly mode"):
                reader.execute(sql)
    finally:
        reader.close()
    assert owner.query("SELECT count() FROM t").scalar() == 50


@pytest.mark.parametrize("category, query", CORPUS, ids=[f"{c}:{q[:50]}" for c, q in CORPUS])
def test_endpoint_refuses_or_cuts(endpoint, owner, canary, category, query):
    status, body, _ = call(endpoint.address, canary.fill(query), timeout=120)
    assert canary.token not in body
    if category == "exhaustion" and status == 400:
        return  # bounded: numbers() is a table function (the reader's profile refuses it), 18.16 lacks
        # repeat() and several joins; the time limit is tested below
    problem = http_verdict(category, status, body, MAX_ROWS)
    assert problem is None, problem
    assert owner.query("SELECT count() FROM t").scalar() == 50


def test_the_readers_limits_cut_a_huge_query(endpoint):
    """5·10⁹ joined rows: the reader's profile (`services up`: 30 s, 2 GB) stops it."""
    sql = ("SELECT count() FROM (SELECT arrayJoin(range(100000)) AS x FROM t) "
           "CROSS JOIN (SELECT arrayJoin(range(1000)) AS y) WHERE cityHash64(x, y) % 7 = 1")
    status, body, _ = call(endpoint.address, sql, timeout=120)
    assert status == 400 and ("Timeout exceeded" in body or "Memory limit" in body)


@pytest.mark.parametrize("category, query", [(c, q) for c, q in CORPUS if c != "exhaustion"],
                         ids=[f"{c}:{q[:50]}" for c, q in CORPUS if c != "exhaustion"])
def test_cli_sql_refuses(owner, clickhouse_url, canary, category, query, capsys, monkeypatch, tmp_path):
    """`vidnexus sql --store clickhouse` (the endpoint test above covers the limits on the server)."""
    from vidnexus.cli import run

    monkeypatch.setenv("VNX_CLICKHOUSE_URL", clickhouse_url)
    monkeypatch.chdir(tmp_path)
    rc = run(["sql", canary.fill(query), "--store", "clickhouse", "--max-rows", str(MAX_ROWS)])
    out, err = capsys.readouterr()
    assert canary.token not in out + err
    problem = cli_verdict(category, rc, out, err)
    assert problem is None, problem
    assert owner.query("SELECT count() FROM t").scalar() == 50


def test_cli_write_mode_uses_the_owner(owner, clickhouse_url, capsys, monkeypatch):
    from vidnexus.cli import run

    monkeypatch.setenv("VNX_CLICKHOUSE_URL", clickhouse_url)
    assert run(["sql", "INSERT INTO t VALUES (1000)", "--store", "clickhouse", "--write"]) == 2
    assert "INSERT … SELECT" in capsys.readouterr().err
    assert run(["sql", "INSERT INTO t SELECT 1000", "--store", "clickhouse", "--write"]) == 0
    assert run(["sql", "SELECT count() FROM t", "--store", "clickhouse", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {"count()": 51}
    owner.execute("ALTER TABLE t DELETE WHERE a = 1000")  # the corpus above counts 50 (18.16: async)


def test_a_missing_reader_is_a_clear_error(clickhouse_url, capsys, monkeypatch):
    from vidnexus.cli import run

    monkeypatch.setenv("VNX_CLICKHOUSE_URL", clickhouse_url)
    monkeypatch.setenv("VNX_CLICKHOUSE_READER_URL", reader_url(clickhouse_url).replace("vnx_reader", "nobody"))
    assert run(["sql", "SELECT 1", "--store", "clickhouse"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "VNX_CLICKHOUSE_READER_URL" in err


def test_documented_queries_run_on_the_server(clickhouse_url, endpoint):
    """The apps' queries, checked by the guard (chdb's parser) and run on 18.16 in their canonical form."""
    from vidnexus.apps import APP_REFS
    from vidnexus.connectors.store import ensure_table
    from vidnexus.apps import load_app
    from vidnexus.operators.engine import FRAMES_TABLE

    owner = ClickHouseStore(clickhouse_url)
    try:
        ensure_table(owner, FRAMES_TABLE)
        for ref in APP_REFS.values():
            for table in load_app(ref).tables.values():
                ensure_table(owner, table.schema())
    finally:
        owner.close()
    failures = []
    for name, ref in APP_REFS.items():
        for title, sql in importlib.import_module(ref.split(":")[0]).DEMO.queries.items():
            status, body, _ = call(endpoint.address, sql)
            if status != 200:
                failures.append(f"{name} {title}: {status} {body[:200]}")
    assert not failures, failures
