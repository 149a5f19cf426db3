"""Attack corpus for the read-only SQL surface (the HTTP endpoint and ``vidnexus sql``).

Every entry is (category, query). ``{canary}`` is the path of a file holding a random token and
``{url}`` an HTTP URL that serves it: a query that leaks either shows the token in its response.
Each function that reaches outside the store appears in at least four spellings (plain,
upper-case, back-quoted, double-quoted, a comment or a line break between name and parenthesis).
"""

from __future__ import annotations

# Table functions that read or write outside the store, with arguments that would reach the canary.
OUTSIDE_TABLE_FUNCTIONS = {
    "file": "'{canary}', 'LineAsString'",
    "url": "'{url}', 'LineAsString'",
    "s3": "'{url}', 'LineAsString'",
    "remote": "'127.0.0.1:19000', system.one",
    "remoteSecure": "'127.0.0.1:19440', system.one",
    "cluster": "'default', system.one",
    "mysql": "'127.0.0.1:3306', 'db', 't', 'u', 'p'",
    "postgresql": "'127.0.0.1:5432', 'db', 't', 'u', 'p'",
    "hdfs": "'hdfs://127.0.0.1:9000/x', 'LineAsString'",
    "sqlite": "'{canary}', 't'",
    "executable": "'cat {canary}', 'LineAsString', 'x String'",
    "jdbc": "'jdbc:x', 'db', 't'",
    "odbc": "'DSN=x', 'db', 't'",
    "azureBlobStorage": "'{url}', 'c', 'b'",
    "deltaLake": "'{url}'",
    "iceberg": "'{url}'",
    "urlCluster": "'default', '{url}', 'LineAsString'",
    "merge": "'system', '.*'",
    "dictionary": "'d'",
    "input": "'x String'",
}

SPELLINGS = (
    lambda f: f,
    lambda f: f.upper(),
    lambda f: f"`{f}`",
    lambda f: f'"{f}"',
    lambda f: f"{f} /* hidden */ ",
    lambda f: f"{f}\n  ",
)


def outside_queries() -> list[tuple[str, str]]:
    """``SELECT * FROM f(…)`` for every outside table function in every spelling (file and url in
    all six, the others in the first four and one with a comment)."""
    out = []
    for name, args in OUTSIDE_TABLE_FUNCTIONS.items():
        spellings = SPELLINGS if name in ("file", "url") else SPELLINGS[:5]
        for spell in spellings:
            out.append(("table function", f"SELECT * FROM {spell(name)}({args})"))
    return out


SCALAR_AND_NESTED = [
    # the scalar file() reads a file too; nested and hidden places
    "SELECT file('{canary}')",
    "select FILE('{canary}')",
    "SELECT `file`('{canary}')",
    'SELECT "file"(\'{canary}\')',
    "SELECT file -- comment\n('{canary}')",
    "SELECT * FROM t WHERE a IN (SELECT * FROM file('{canary}', 'LineAsString'))",
    "WITH x AS (SELECT * FROM file('{canary}', 'LineAsString')) SELECT * FROM x",
    "SELECT * FROM (SELECT file('{canary}'))",
    "SELECT * FROM t AS a JOIN file('{canary}', 'LineAsString') AS b ON 1 = 1",
    "SELECT arrayMap(x -> file(x), ['{canary}'])",
    "SELECT count() OVER (PARTITION BY file('{canary}')) FROM t",
    "SELECT fileIf('{canary}', 1)",
    "SELECT * FROM t ARRAY JOIN [file('{canary}')] AS z",
    "EXPLAIN SYNTAX SELECT file('{canary}')",
    "EXPLAIN SELECT * FROM url('{url}', 'LineAsString')",
    "DESCRIBE file('{canary}', 'LineAsString')",
    "DESCRIBE (SELECT file('{canary}'))",
    "SELECT * FROM values('a String', 'x') AS v JOIN url('{url}', 'LineAsString') AS u ON 1 = 1",
    "SELECT 1 AS `x\\n      Function file`",
    "SELECT 1 AS `x) (children 0`, file('{canary}')",
    "SELECT fіle('{canary}')",  # Cyrillic і: an unknown function, never the real one
    "SELECT * APPLY(file) FROM t",
    "SELECT dictGet('d', 'a', toUInt64(1))",
    "SELECT joinGet('t', 'a', 1)",
    "SELECT getSetting('readonly')",
    "SELECT currentUser(), hostName()",
    "SELECT demangle('x'), addressToLine(toUInt64(1))",
    "SELECT getMacro('x')",
    "SELECT filesystemAvailable()",
    "SELECT sleep(3)",
    "SELECT sleepEachRow(1) FROM numbers(5)",
    "SELECT aiGenerate('hello')",
    "SELECT hasColumnInTable('system', 'processes', 'query')",
    "SELECT throwIf(1)",
]

WRITES_AND_DDL = [
    "INSERT INTO t VALUES (99)",
    "INSERT INTO t SELECT 1",
    "INSERT INTO FUNCTION file('p.csv', 'CSV', 'a Int8') VALUES (1)",
    "SELECT 1 INTO OUTFILE 'p.csv'",
    "ALTER TABLE t DELETE WHERE 1",
    "ALTER TABLE t UPDATE a = 0 WHERE 1",
    "DELETE FROM t WHERE 1",
    "TRUNCATE TABLE t",
    "OPTIMIZE TABLE t FINAL",
    "RENAME TABLE t TO t2",
    "DROP TABLE t",
    "DROP DATABASE default",
    "DETACH TABLE t",
    "CREATE TABLE x (a UInt8) ENGINE = Memory",
    "CREATE DATABASE evil",
    "CREATE VIEW v AS SELECT * FROM file('{canary}', 'LineAsString')",
    "CREATE FUNCTION f AS x -> x",
    "CREATE USER evil",
    "GRANT ALL ON *.* TO default",
    "UNDROP TABLE t",
    "SYSTEM SHUTDOWN",
    "SYSTEM FLUSH LOGS",
    "KILL QUERY WHERE 1",
    "SET readonly = 0",
    "USE system",
    "BACKUP TABLE t TO File('b.zip')",
]

SEVERAL_STATEMENTS = [
    "SELECT 1; DROP TABLE t",
    "SELECT 1;DROP TABLE t;",
    "SELECT 1 /* ; */; TRUNCATE TABLE t",
    "SELECT 1; SELECT file('{canary}')",
    "SELECT 1\n;\nSYSTEM SHUTDOWN",
]

SETTINGS_AND_FORMAT = [
    "SELECT 1 SETTINGS readonly = 0",
    "SELECT count() FROM t SETTINGS max_execution_time = 0",
    "SELECT * FROM t SETTINGS allow_introspection_functions = 1",
    "SELECT 1 FORMAT TabSeparated",
    "EXPLAIN header = 1 SELECT 1",
    "SELECT {{x:String}}",
]

SYSTEM_TABLES = [
    "SELECT * FROM system.processes",
    "SELECT query FROM system.query_log",
    "SELECT * FROM system.settings",
    "SELECT * FROM system.server_settings",
    "SELECT * FROM system.users",
    "SELECT * FROM system.tables",
    "SELECT * FROM system.stack_trace",
    "SELECT * FROM system.build_options",
    "SELECT * FROM `system`.`processes`",
    'SELECT * FROM "system"."processes"',
    "SELECT * FROM SYSTEM.PROCESSES",
    "SELECT * FROM INFORMATION_SCHEMA.TABLES",
    "SELECT 1 IN system.processes",
    "SHOW PROCESSLIST",
    "SHOW SETTINGS LIKE '%'",
    "SHOW DATABASES",
    "SHOW TABLES FROM system",
    "SHOW CREATE TABLE system.processes",
    "DESCRIBE system.processes",
    "EXISTS system.processes",
    "SHOW USERS",
    "SHOW GRANTS",
]

# Allowed statements that would run forever, use all memory or return everything: each must be cut
# by a limit (an error naming it, or a truncated result).
EXHAUSTION = [
    "SELECT sum(cityHash64(number)) FROM numbers(1000000000000)",
    "SELECT count() FROM t AS a, t AS b, t AS c, t AS d, t AS e, t AS f, t AS g, t AS h WHERE a.a + h.a > 1",
    "SELECT groupArray(number) FROM numbers(10000000000)",
    "SELECT * FROM numbers(1000000000)",
    "SELECT length(repeat('x', 900000000))",
    "SELECT arrayMap(x -> cityHash64(x), range(1000000000))",
    "SELECT a, b.a FROM t, t AS b",
]


def corpus() -> list[tuple[str, str]]:
    """Every query of the corpus with its category."""
    out = outside_queries()
    for cat, items in (("scalar or nested", SCALAR_AND_NESTED), ("write or DDL", WRITES_AND_DDL),
                       ("several statements", SEVERAL_STATEMENTS), ("settings or format", SETTINGS_AND_FORMAT),
                       ("system table", SYSTEM_TABLES), ("exhaustion", EXHAUSTION)):
        out += [(cat, q) for q in items]
    return out
