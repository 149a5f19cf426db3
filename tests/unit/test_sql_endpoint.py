"""The read-only SQL endpoint and its guard: parse-tree reading, the walk's decisions, token
back-off, limits, over HTTP on the embedded store. The attack corpus is in tests/reliability."""

import json
import urllib.error
import urllib.request

import pytest

from vidnexus.sql_allowlist import function_allowed, table_function_allowed
from vidnexus.sql_endpoint import AuthBackoff, EndpointLimits, SqlEndpoint
from vidnexus.sql_guard import AstNode, GuardPolicy, RefusedQuery, SqlGuard, check_identifiers, check_tree, parse_ast

TOKEN = "t0ken-for-tests-0123456789"


# -- reading EXPLAIN AST rows (pure) ------------------------------------------------------------
def test_parse_ast_builds_the_tree_with_names_and_aliases():
    rows = ["SelectWithUnionQuery (children 1)", " ExpressionList (children 1)", "  SelectQuery (children 1)",
            "   ExpressionList (children 2)", "    Function count (alias frames) (children 1)",
            "     ExpressionList", "    Identifier a b.c (alias x y)"]
    tree = parse_ast(rows)
    fn, ident = tree.children[0].children[0].children[0].children
    assert (fn.kind, fn.name, fn.alias, len(fn.children)) == ("Function", "count", "frames", 1)
    assert (ident.kind, ident.name, ident.alias) == ("Identifier", "a b.c", "x y")


@pytest.mark.parametrize("rows, why", [
    (["SelectWithUnionQuery (children 1)", " ExpressionList (children 2)", "  Literal UInt64_1"], "count"),
    (["SelectWithUnionQuery (children 1)", "   ExpressionList"], "skips a level"),
    (["SelectWithUnionQuery", "ShowTables"], "two roots"),
    (["SelectWithUnionQuery (children 1)", " ExpressionList (children 1)", "  Literal UInt64_1 (alias x",
      "r)"], "an identifier broken over rows"),
    (["  SelectWithUnionQuery"], "indented root"),
    ([], "empty"),
])
def test_parse_ast_refuses_rows_it_cannot_read(rows, why):
    with pytest.raises(RefusedQuery):
        parse_ast(rows)


def test_identifiers_with_escapes_or_control_characters_are_refused():
    check_identifiers("SELECT 1 AS `a b`, 'line\\nbreak' AS s")  # escapes in strings are fine
    for sql in ("SELECT 1 AS `a\\nb`", "SELECT 1 AS `a\x01b`", 'SELECT 1 AS "q\\tr"'):
        with pytest.raises(RefusedQuery, match="identifiers"):
            check_identifiers(sql)


# -- the allow-lists (pure) ---------------------------------------------------------------------
@pytest.mark.parametrize("name, ok", [
    ("count", True), ("COUNT", True), ("countIf", True), ("uniqExactArrayIf", True), ("quantilesTDigest", True),
    ("toStartOfMinute", True), ("file", False), ("FILE", False), ("fileIf", False), ("url", False),
    ("getSetting", False), ("dictGet", False), ("sleep", False), ("currentUser", False), ("demangle", False),
    ("aiGenerate", False), ("IfIf", False), ("executable", False),
])
def test_function_allow_list(name, ok):
    assert function_allowed(name) is ok


def test_table_function_allow_list():
    assert table_function_allowed("numbers") and table_function_allowed("VALUES")
    assert not any(table_function_allowed(f) for f in ("file", "url", "remote", "s3", "merge", "input"))


# -- the walk, on trees ClickHouse's parser builds ----------------------------------------------
@pytest.fixture(scope="module")
def guard(tmp_path_factory):
    from vidnexus.connectors.chdb_store import ChdbStore

    store = ChdbStore(tmp_path_factory.mktemp("guard") / "chdb")
    store.execute("CREATE TABLE t (a UInt32, s String) ENGINE = MergeTree ORDER BY a")
    store.insert("t", ["a", "s"], [(i, f"s{i}") for i in range(50)])
    g = SqlGuard(store)
    yield g
    store.close()


@pytest.mark.parametrize("sql, kind", [
    ("SELECT 1", "select"),
    ("select count() from t where s = 'a;b'", "select"),  # a ; inside a string is fine
    ("WITH 2 AS x SELECT x", "select"),
    ("WITH q AS (SELECT a FROM t) SELECT count() FROM q", "select"),
    ("SELECT a, countIf(a > 1) OVER (PARTITION BY s) FROM default.t", "select"),
    ("SELECT arrayMap(x -> x * 2, [1, 2])", "select"),
    ("SELECT * FROM numbers(3) UNION ALL SELECT 1", "select"),
    ("SELECT name, type FROM system.columns WHERE table = 't'", "select"),
    ("SELECT 1 -- a comment; DROP TABLE x\n", "select"),
    ("SELECT 1;", "select"),
    ("SHOW TABLES", "show"),
    ("SHOW TABLES LIKE 't%'", "show"),
    ("SHOW CREATE TABLE t", "show"),
    ("DESCRIBE TABLE t", "describe"),
    ("EXISTS TABLE t", "exists"),
    ("EXPLAIN SELECT count() FROM t", "explain"),
])
def test_reads_are_allowed(guard, sql, kind):
    assert guard.check(sql).kind == kind


@pytest.mark.parametrize("sql, msg", [
    ("INSERT INTO t VALUES (1)", "INSERT is not allowed"),
    ("DROP TABLE t", "DROP is not allowed"),
    ("ALTER TABLE t DELETE WHERE 1", "ALTER is not allowed"),
    ("TRUNCATE TABLE t", "TRUNCATE is not allowed"),
    ("KILL QUERY WHERE 1", "KILL QUERY is not allowed"),
    ("SYSTEM SHUTDOWN", "SYSTEM is not allowed"),
    ("SELECT 1; DROP TABLE t", "one statement per request"),
    ("/* hi */ DROP TABLE t", "DROP is not allowed"),
    ("SELECT * FROM `file`('/etc/passwd', 'LineAsString')", "table function file"),
    ("SELECT \"file\"('/etc/passwd')", "function file"),
    ("SELECT 1 INTO OUTFILE '/tmp/x'", "INTO OUTFILE"),
    ("SELECT 1 SETTINGS readonly = 0", "SETTINGS is not allowed"),
    ("SELECT * FROM system.processes", "table system.processes is not allowed"),
    ("SELECT 1 IN system.processes", "table system.processes is not allowed"),
    ("SHOW DATABASES", "SHOW DATABASES is not allowed"),
    ("SHOW TABLES FROM system", "is not allowed"),
    ("DESCRIBE system.processes", "table system.processes"),
    ("SELECT * APPLY(toString) FROM t", "APPLY is not allowed"),
    ("SELECT nope(", "not a valid query"),
    ("", "empty query"),
])
def test_writes_ddl_and_escapes_are_refused(guard, sql, msg):
    with pytest.raises(RefusedQuery, match=msg):
        guard.check(sql)


def test_check_tree_decides_on_positions_not_names():
    """A function directly under a TableExpression is a table function, elsewhere a function."""
    def tree(parent: str) -> AstNode:
        fn = AstNode("Function", "numbers", None, (AstNode("ExpressionList", "", None, ()),))
        return AstNode("SelectWithUnionQuery", "", None, (AstNode(parent, "", None, (fn,)),))

    assert check_tree(tree("TableExpression"), GuardPolicy("default"), "SELECT * FROM numbers()") == "select"
    with pytest.raises(RefusedQuery, match="function numbers"):
        check_tree(tree("ExpressionList"), GuardPolicy("default"), "SELECT numbers()")


def test_write_mode_allows_one_statement_of_any_kind(guard):
    assert guard.check("CREATE TABLE w (a UInt8) ENGINE = Memory", write=True).kind == "write"
    with pytest.raises(RefusedQuery, match="one statement"):
        guard.check("CREATE TABLE w (a UInt8) ENGINE = Memory; DROP TABLE t", write=True)


# -- token back-off (pure) ----------------------------------------------------------------------
def test_auth_backoff_doubles_and_is_per_address():
    b = AuthBackoff(free_failures=2, max_block_s=5)
    waits = []
    for t in range(7):
        b.failed("a", now=float(t))
        waits.append(b.blocked_for("a", now=float(t)))
    assert waits == [0, 0, 1, 2, 4, 5, 5]
    assert b.blocked_for("b", now=6) == 0
    b.succeeded("a")
    assert b.blocked_for("a", now=6) == 0


def test_auth_backoff_remembers_a_bounded_number_of_addresses():
    b = AuthBackoff(free_failures=0, max_clients=3)
    for i in range(10):
        b.failed(f"10.0.0.{i}", now=0)
    assert b.blocked_for("10.0.0.0", now=0) == 0 and b.blocked_for("10.0.0.9", now=0) > 0


# -- over HTTP ----------------------------------------------------------------------------------
@pytest.fixture
def endpoint(guard):
    ep = SqlEndpoint(guard.store, TOKEN, port=0, limits=EndpointLimits(max_rows=20, timeout_s=2)).start()
    yield ep, guard.store
    ep.stop()


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
    assert [r[0] for r in doc["rows"]] == list(range(20))
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
    code, doc = call(ep, "SELECT sum(cityHash64(number)) FROM numbers(1000000000000)")  # stopped at 2 s
    assert code == 400 and "imeout" in doc["error"]
    code, doc = call(ep, "SELECT 1 AS ok")  # the engine is clean after a cut query
    assert code == 200 and doc["rows"] == [[1]]


def test_short_tokens_are_refused():
    from vidnexus.errors import VidnexusError

    with pytest.raises(VidnexusError, match="at least 16"):
        SqlEndpoint(store=None, token="short")  # type: ignore[arg-type]
