"""Deny-by-default checks of users' SQL, decided on ClickHouse's own parse tree.

Every query from a user (the HTTP endpoint, ``vidnexus sql``) goes through :class:`SqlGuard`:

1. ClickHouse's parser formats the text, passed as a string literal to ``formatQuery`` so that
   nothing of it runs: a syntax error or a second statement is refused here, and what follows (the
   check and the execution) sees only the canonical single statement.
2. ``EXPLAIN AST`` of that statement gives the parse tree, one row per node; :func:`parse_ast` reads
   it strictly (a row it does not understand is a refusal).
3. :func:`check_tree` walks it (pure): exactly one statement of an allowed kind; every node kind
   known; every function and table function on the allow-lists of :mod:`vidnexus.sql_allowlist`;
   tables only from the project's database and the allowed ``system`` tables; no ``SETTINGS``,
   ``FORMAT``, ``INTO OUTFILE`` or query parameters.
4. The statement runs with the engine's own limits as a second line of defence (see
   :func:`read_only_settings`).

In ``write`` mode (``vidnexus sql --write``, the owner's) steps 1 and 4's time and row limits stay
and the walk is skipped: one statement, any kind.

Example:
    >>> rows = ["SelectWithUnionQuery (children 1)", " ExpressionList (children 1)",
    ...         "  SelectQuery (children 2)", "   ExpressionList (children 1)", "    Asterisk",
    ...         "   TablesInSelectQuery (children 1)", "    TablesInSelectQueryElement (children 1)",
    ...         "     TableExpression (children 1)", "      Function file (children 1)",
    ...         "       ExpressionList (children 1)", "        Literal '/etc/passwd'"]
    >>> check_tree(parse_ast(rows), GuardPolicy("default"), "SELECT * FROM file('/etc/passwd')")
    Traceback (most recent call last):
    ...
    vidnexus.sql_guard.RefusedQuery: table function file() is not allowed: only numbers, values, zeros
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from vidnexus.connectors.store import QueryResult, Store, quote
from vidnexus.errors import ConnectorError, VidnexusError
from vidnexus.sql_allowlist import SYSTEM_TABLES, TABLE_FUNCTIONS, function_allowed, table_function_allowed

__all__ = ["RefusedQuery", "AstNode", "GuardPolicy", "Checked", "SqlLimits", "parse_ast", "check_tree",
           "check_identifiers", "limit_settings", "read_only_settings", "SqlGuard"]


class RefusedQuery(VidnexusError):
    """The statement is not allowed (the message says which part and why)."""


@dataclass(frozen=True)
class AstNode:
    """One node of ``EXPLAIN AST``: its kind (``Function``), the text after it (``file``), its alias
    and children."""

    kind: str
    text: str
    alias: str | None
    children: tuple["AstNode", ...]

    @property
    def name(self) -> str:
        return self.text

    def walk(self) -> Any:
        yield self
        for c in self.children:
            yield from c.walk()


# "<kind>[ <text>][ (alias <a>)][ (children <n>)]"; the kind is a C++ class name.
_ROW = re.compile(r"(?P<kind>[A-Za-z]+)(?: (?P<text>.*?))??(?: \(alias (?P<alias>.*?)\))?(?: \(children (?P<n>\d+)\))?")


def parse_ast(rows: list[str]) -> AstNode:
    """The tree of ``EXPLAIN AST`` rows (one node per row, one space of indent per level).

    Raises:
        RefusedQuery: a row that does not read as a node, an indent that skips a level, or a
            children count that does not match (an identifier with a line break in it would do
            that; :func:`check_identifiers` refuses those earlier).
    """
    stack: list[tuple[int, dict[str, Any]]] = []
    root: dict[str, Any] | None = None
    for row in rows:
        depth = len(row) - len(row.lstrip(" "))
        m = _ROW.fullmatch(row[depth:])
        if m is None or "\n" in row or (stack and depth > stack[-1][0] + 1) or (not stack and depth != 0):
            raise RefusedQuery(f"cannot read the parse tree at {row.strip()[:80]!r}")
        node: dict[str, Any] = {"kind": m["kind"], "text": (m["text"] or "").strip(), "alias": m["alias"],
                "n": int(m["n"] or 0), "children": []}
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            stack[-1][1]["children"].append(node)
        elif root is None:
            root = node
        else:
            raise RefusedQuery("one statement per request")
        stack.append((depth, node))
    if root is None:
        raise RefusedQuery("empty query")

    def freeze(d: dict[str, Any]) -> AstNode:
        if len(d["children"]) != d["n"]:
            raise RefusedQuery(f"cannot read the parse tree at {d['kind']} {d['text'][:60]!r}")
        return AstNode(d["kind"], d["text"], d["alias"], tuple(freeze(c) for c in d["children"]))

    return freeze(root)


@dataclass(frozen=True)
class GuardPolicy:
    """What a read-only query may reach: tables of ``database`` (unqualified names are in it) and
    ``system.<t>`` for ``t`` in ``system_tables``."""

    database: str
    system_tables: frozenset[str] = SYSTEM_TABLES


@dataclass(frozen=True)
class Checked:
    """A statement that passed: its canonical text and kind (``select``, ``show``, ``describe``,
    ``exists``, ``explain`` or, in write mode, ``write``)."""

    sql: str
    kind: str


# Node kinds a SELECT may contain. Anything else (Set = SETTINGS, QueryParameter, ColumnsApply-
# Transformer = APPLY(func), future syntax) is refused.
_SELECT_NODES = frozenset({
    "SelectWithUnionQuery", "SelectIntersectExceptQuery", "SelectQuery", "ExpressionList", "Asterisk",
    "QualifiedAsterisk", "ColumnsRegexpMatcher", "ColumnsListMatcher", "QualifiedColumnsRegexpMatcher",
    "QualifiedColumnsListMatcher", "ColumnsTransformerList", "ColumnsExceptTransformer",
    "ColumnsReplaceTransformer", "ColumnsReplaceTransformerReplacement", "TablesInSelectQuery",
    "TablesInSelectQueryElement", "TableExpression", "TableJoin", "ArrayJoin", "Function", "Identifier",
    "TableIdentifier", "Literal", "OrderByElement", "WithElement", "Subquery", "WindowDefinition",
    "WindowListElement", "SampleRatio", "InterpolateElement",
})
_EXPLAIN_KINDS = frozenset({"EXPLAIN", "EXPLAIN AST", "EXPLAIN SYNTAX", "EXPLAIN PLAN", "EXPLAIN PIPELINE",
                            "EXPLAIN ESTIMATE"})
_IN_FUNCTIONS = frozenset({"in", "notin", "globalin", "globalnotin", "nullin", "notnullin", "globalnullin",
                           "globalnotnullin"})


_FUNCTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TABLE_NAME = re.compile(r"(?:[A-Za-z0-9_]+\.)?[A-Za-z0-9_]+")


def _check_table(name: str, policy: GuardPolicy) -> None:
    if not _TABLE_NAME.fullmatch(name):
        raise RefusedQuery(f"table name {name!r} is not allowed: use plain names (letters, digits, _)")
    db, sep, table = name.rpartition(".")
    if not sep or db == policy.database:
        return
    if db == "system" and table in policy.system_tables:
        return
    allowed = ", ".join(f"system.{t}" for t in sorted(policy.system_tables))
    raise RefusedQuery(f"table {name} is not allowed: only the tables of database {policy.database} and {allowed}")


def _check_select(node: AstNode, policy: GuardPolicy) -> None:
    if len(node.children) != 1:  # a second child is FORMAT, INTO OUTFILE or SETTINGS of the union
        raise RefusedQuery("FORMAT, INTO OUTFILE and SETTINGS are not allowed (the endpoint sets the format and limits)")
    parents: dict[int, AstNode] = {}
    for n in node.walk():
        for c in n.children:
            parents[id(c)] = n
        if n.kind not in _SELECT_NODES:
            what = {"Set": "SETTINGS", "QueryParameter": "query parameters",
                    "ColumnsApplyTransformer": "APPLY"}.get(n.kind, n.kind)
            raise RefusedQuery(f"{what} is not allowed in a read-only query")
        if n.kind == "TableIdentifier":
            _check_table(n.name, policy)
        elif n.kind == "Function":
            if not _FUNCTION_NAME.fullmatch(n.name):
                raise RefusedQuery(f"function name {n.name!r} is not allowed")
            parent = parents.get(id(n))
            if parent is not None and parent.kind == "TableExpression":
                if not table_function_allowed(n.name):
                    raise RefusedQuery(f"table function {n.name}() is not allowed: only "
                                       f"{', '.join(sorted(TABLE_FUNCTIONS))}")
            elif not function_allowed(n.name):
                raise RefusedQuery(f"function {n.name}() is not allowed in a read-only query "
                                   "(it is not on the allow-list in vidnexus/sql_allowlist.py)")
            if n.name.lower() in _IN_FUNCTIONS and n.children and len(n.children[0].children) == 2:
                rhs = n.children[0].children[1]  # `x IN db.table` reads a table
                if rhs.kind == "Identifier":
                    _check_table(rhs.name, policy)


# ShowTables is also the node of SHOW DATABASES / DICTIONARIES / CLUSTERS / SETTINGS / FULL or
# TEMPORARY TABLES: only the canonical text tells them apart.
_SHOW_TABLES = re.compile(r"SHOW TABLES(?: (?:NOT )?I?LIKE '(?:[^'\\]|\\.)*')?(?: LIMIT \d+)?")


def check_tree(tree: AstNode, policy: GuardPolicy, sql: str) -> str:
    """The statement's kind if ``tree`` (the parse tree of the canonical text ``sql``) is an allowed
    read-only statement.

    Raises:
        RefusedQuery: naming the part that is not allowed.
    """
    if tree.kind == "SelectWithUnionQuery":
        _check_select(tree, policy)
        return "select"
    if tree.kind == "Explain":
        if tree.text not in _EXPLAIN_KINDS or len(tree.children) != 1 or tree.children[0].kind != "SelectWithUnionQuery":
            raise RefusedQuery(f"{tree.text or 'EXPLAIN'} is allowed only of a SELECT, without settings")
        _check_select(tree.children[0], policy)
        return "explain"
    if tree.kind == "ShowTables":
        if tree.children or not _SHOW_TABLES.fullmatch(sql.strip()):
            raise RefusedQuery(f"{' '.join(sql.split()[:2])[:40]} is not allowed: SHOW TABLES [LIKE '…'] of "
                               f"database {policy.database} is")
        return "show"
    if tree.kind == "DescribeQuery":
        if len(tree.children) != 1 or tree.children[0].kind != "TableExpression":
            raise RefusedQuery("DESCRIBE is allowed only of a table")
        _check_select(AstNode("SelectWithUnionQuery", "", None, (tree.children[0],)), policy)
        return "describe"
    if tree.kind in ("ExistsTableQuery", "ShowCreateTableQuery"):
        names = [c.name for c in tree.children if c.kind == "Identifier"]
        if len(names) != len(tree.children) or not 1 <= len(names) <= 2:
            raise RefusedQuery(f"{tree.kind} is allowed only of a table")
        _check_table(".".join(names), policy)
        return "exists" if tree.kind == "ExistsTableQuery" else "show"
    raise RefusedQuery(f"{_statement_name(tree)} is not allowed: the query is read-only "
                       "(SELECT, WITH, SHOW TABLES, SHOW CREATE TABLE, DESCRIBE, EXISTS, EXPLAIN)")


def _statement_name(tree: AstNode) -> str:
    """``AlterQuery`` → ``ALTER``, ``KillQueryQuery`` → ``KILL QUERY``, ``SHOW USERS query`` →
    ``SHOW USERS`` (for messages)."""
    if tree.kind.isupper():
        return f"{tree.kind} {tree.text}".removesuffix("query").strip()
    words = re.findall(r"[A-Z][a-z]*", re.sub(r"Query$", "", tree.kind))
    return " ".join(words).upper() or tree.kind


def check_identifiers(sql: str) -> None:
    """Refuse back-quoted or double-quoted identifiers with escapes or control characters in the
    canonical text: they would print as several rows of ``EXPLAIN AST``.

    Example:
        >>> check_identifiers("SELECT 1 AS `a b`, 'it\\\\'s'")
        >>> check_identifiers("SELECT 1 AS `a\\\\nb`")
        Traceback (most recent call last):
        ...
        vidnexus.sql_guard.RefusedQuery: identifiers with escapes or control characters are not allowed
    """
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'`\"":
            j = i + 1
            while j < n and sql[j] != c:
                j += 2 if sql[j] == "\\" else 1
            body = sql[i + 1 : j]
            if c != "'" and ("\\" in body or any(ord(ch) < 32 or ord(ch) == 127 for ch in body)):
                raise RefusedQuery("identifiers with escapes or control characters are not allowed")
            i = j + 1
        else:
            i += 1


@dataclass(frozen=True)
class SqlLimits:
    """Limits on one query (``vidnexus sql`` and the endpoint)."""

    max_rows: int = 10_000
    """Rows returned at most (``0``: no limit; the result says when rows were cut)."""
    timeout_s: float = 10.0
    """Execution time limit."""
    max_memory_bytes: int = 1 << 30
    """Memory one query may use."""
    max_result_bytes: int = 256 << 20
    """Bytes of result at most."""


def limit_settings(limits: SqlLimits) -> dict[str, Any]:
    """The engine's settings that enforce ``limits`` (time, memory, result size).

    Example:
        >>> limit_settings(SqlLimits(max_rows=5, timeout_s=2))["max_result_rows"]
        6
    """
    s: dict[str, Any] = {"max_execution_time": max(1, round(limits.timeout_s)),
                         "max_memory_usage": limits.max_memory_bytes, "max_result_bytes": limits.max_result_bytes,
                         "result_overflow_mode": "break"}
    if limits.max_rows:
        s["max_result_rows"] = limits.max_rows + 1
    return s


def read_only_settings(limits: SqlLimits) -> dict[str, Any]:
    """:func:`limit_settings` plus ``readonly=1`` (the engine itself then refuses writes, DDL, SET
    and table functions) and no introspection functions."""
    return {"readonly": 1, "allow_introspection_functions": 0, **limit_settings(limits)}


class SqlGuard:
    """Check and run users' SQL on ``store``.

    The parser is ClickHouse's: the store's own engine when it has ``formatQuery`` and ``EXPLAIN AST``
    (chdb), otherwise an in-memory chdb engine in this process (the 18.16 server has neither); the
    canonical text is what runs, so what was checked is what executes.
    """

    def __init__(self, store: Store, *, database: str | None = None) -> None:
        self.store = store
        self._own_parser: Store | None = None
        self.policy = GuardPolicy(database or str(store.query("SELECT currentDatabase()").scalar()))

    def _parse(self, sql: str) -> QueryResult:
        if self.store.version >= (24, 1):
            return self.store.query(sql)
        if self._own_parser is None:
            from vidnexus.connectors.chdb_store import ChdbStore

            # One chdb engine per process: this works only where no embedded store is open.
            self._own_parser = ChdbStore(None)
        return self._own_parser.query(sql)

    def close(self) -> None:
        """Release the in-memory parser this guard opened, if any (not the store)."""
        if self._own_parser is not None:
            self._own_parser.close()
            self._own_parser = None

    def canonical(self, sql: str) -> str:
        """The single statement in ``sql``, as ClickHouse's parser formats it.

        Raises:
            RefusedQuery: empty, several statements, or not parseable (the parser's reason).
        """
        if not sql.strip():
            raise RefusedQuery("empty query")
        if "\x00" in sql:
            raise RefusedQuery("the query contains a NUL character")
        try:
            text = str(self._parse(f"SELECT formatQuery({quote(sql)})").scalar())
        except ConnectorError as e:
            msg = str(e).removeprefix("query failed: ")
            if "Multi-statements are not allowed" in msg:
                raise RefusedQuery("one statement per request") from None
            raise RefusedQuery(f"not a valid query: {_engine_reason(msg)}") from None
        if not text.strip():
            raise RefusedQuery("empty query")
        return text

    def check(self, sql: str, *, write: bool = False) -> Checked:
        """The canonical statement if it may run (read-only unless ``write``).

        Raises:
            RefusedQuery: why not.
        """
        text = self.canonical(sql)
        if write:
            return Checked(text, "write")
        check_identifiers(text)
        try:
            rows = [str(r[0]) for r in self._parse(f"EXPLAIN AST {text}").rows]
        except ConnectorError as e:
            raise RefusedQuery(f"not a valid query: {_engine_reason(str(e))}") from None
        return Checked(text, check_tree(parse_ast(rows), self.policy, text))

    def run(self, checked: Checked, limits: SqlLimits) -> tuple[QueryResult, bool]:
        """Run a checked statement with ``limits``: (result, whether rows were cut).

        Raises:
            ConnectorError: the engine's error (a limit, a missing table, …).
        """
        sql = checked.sql
        if checked.kind == "write":
            if not _returns_rows(sql):
                self.store.execute(sql)
                return QueryResult((), (), []), False
            return _cut(self.store.query(sql, settings=limit_settings(limits)), limits.max_rows)
        settings: Mapping[str, Any] = read_only_settings(limits)
        if not self.store.embedded:
            # A server knows only some settings (18.16 has no allow_introspection_functions), and
            # a readonly=1 user's profile, not the query, sets its limits there.
            settings = {k: settings[k] for k in ("readonly", "max_execution_time")}
        if checked.kind == "select" and limits.max_rows:
            sql = f"SELECT * FROM ({sql}) LIMIT {limits.max_rows + 1}"
        return _cut(self.store.query(sql, settings=settings), limits.max_rows)


def _cut(res: QueryResult, max_rows: int) -> tuple[QueryResult, bool]:
    if max_rows and len(res.rows) > max_rows:
        return QueryResult(res.columns, res.types, res.rows[:max_rows]), True
    return res, False


def _returns_rows(sql: str) -> bool:
    return sql.lstrip().split(None, 1)[0].upper() in ("SELECT", "WITH", "SHOW", "DESCRIBE", "EXISTS", "EXPLAIN")


def _engine_reason(msg: str) -> str:
    """The engine's message without its code prefix and the echo of our wrapper."""
    msg = re.sub(r"^(query failed: )?Code: \d+\. DB::Exception: ", "", msg)
    return re.sub(r": In scope SELECT formatQuery\(.*$", "", msg, flags=re.S)[:300]
