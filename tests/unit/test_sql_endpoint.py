"""The read-only SQL endpoint: statement checks, token, limits, over HTTP on the embedded store."""

import json
import urllib.error
import urllib.request

import pytest

from vidnexus.sql_endpoint import EndpointLimits, RefusedQuery, SqlEndpoint, check_read_only

TOKEN = "t0ken-for-tests-0123456789"


@pytest.mark.parametrize("sql", [
    "SELECT 1",
    "select count() from hud_reads where stream = 'a;b'",          # ; inside a string is fine
    "WITH 2 AS x SELECT x",
    "SHOW TABLES",
    "DESCRIBE TABLE hud_reads",
    "EXISTS TABLE hud_reads",
    "SELECT 1 -- a comment; DROP TABLE x\n",
    "SELECT 1;",
])
def test_reads_are_allowed(sql):
    check_read_only(sql)


@pytest.mark.parametrize("sql, msg", [
    ("INSERT INTO t VALUES (1)", "INSERT is not allowed"),
    ("DROP TABLE hud_reads", "DROP is not allowed"),
    ("ALTER TABLE hud_reads DELETE WHERE 1", "ALTER is not allowed"),
    ("TRUNCATE TABLE hud_reads", "TRUNCATE is not allowed"),
    ("CREATE TABLE x (a UInt8) ENGINE = Memory", "CREATE is not allowed"),
    ("SELECT 1; DROP TABLE hud_reads", "one statement per request"),
    ("/* hi */ DROP TABLE t", "DROP is not allowed"),
    ("SELECT * FROM url('http://169.254.169.254/', CSV, 'a String')", "table function url"),
    ("SELECT * FROM file('/etc/passwd', CSV, 'a String')", "table function file"),
    ("SELECT 1 INTO OUTFILE '/tmp/x'", "INTO is not allowed"),
    ("SELECT 1 SETTINGS readonly = 0", "SETTINGS is not allowed"),
    ("SYSTEM SHUTDOWN", "SYSTEM is not allowed"),
    ("", "empty query"),
])
def test_writes_ddl_and_escapes_are_refused(sql, msg):
    with pytest.raises(RefusedQuery, match=msg):
        check_read_only(sql)


@pytest.fixture
def endpoint(tmp_path):
    from vidnexus.connectors.chdb_store import ChdbStore

    store = ChdbStore(tmp_path / "db")
    store.execute("CREATE TABLE t (a UInt32) ENGINE = MergeTree ORDER BY a")
    store.insert("t", ["a"], [(i,) for i in range(50)])
    ep = SqlEndpoint(store, TOKEN, port=0, limits=EndpointLimits(max_rows=20, timeout_s=2)).start()
    yield ep, store
    ep.stop()
    store.close()


def call(ep, sql, token=TOKEN):
    req = urllib.request.Request(f"http://{ep.address[0]}:{ep.address[1]}/sql", data=sql.encode(), method="POST")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_http_select_with_row_limit(endpoint):
    ep, _ = endpoint
    code, doc = call(ep, "SELECT a FROM t ORDER BY a")
    assert code == 200 and doc["columns"] == ["a"] and len(doc["rows"]) == 20 and doc["truncated"] is True
    code, doc = call(ep, "SELECT count() AS n FROM t")
    assert code == 200 and doc["rows"] == [[50]] and doc["truncated"] is False


@pytest.mark.parametrize("sql", ["INSERT INTO t VALUES (99)", "DROP TABLE t", "ALTER TABLE t DELETE WHERE 1"])
def test_http_refuses_writes_and_the_table_is_untouched(endpoint, sql):
    ep, store = endpoint
    code, doc = call(ep, sql)
    assert code == 403 and "not allowed" in doc["error"]
    assert store.query("SELECT count() FROM t").scalar() == 50


@pytest.mark.parametrize("token", [None, "wrong-token-wrong-token"])
def test_http_needs_the_token(endpoint, token):
    ep, _ = endpoint
    code, doc = call(ep, "SELECT 1", token=token)
    assert code == 401 and "token" in doc["error"]


def test_http_query_errors_and_time_limit(endpoint):
    ep, _ = endpoint
    code, doc = call(ep, "SELECT nope FROM t")
    assert code == 400 and "query failed" in doc["error"]
    code, doc = call(ep, "SELECT count() FROM system.numbers")  # never ends: stopped at the time limit
    assert code == 400 and "imeout" in doc["error"]


def test_short_tokens_are_refused(tmp_path):
    from vidnexus.errors import VidnexusError

    with pytest.raises(VidnexusError, match="at least 16"):
        SqlEndpoint(store=None, token="short")  # type: ignore[arg-type]
