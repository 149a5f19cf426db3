import datetime as dt

import pytest

from vidnexus.connectors.clickhouse_store import parse_clickhouse_url
from vidnexus.contracts.schema import Column, TableSchema, adapt_type
from vidnexus.connectors.store import parse_version, quote
from vidnexus.errors import ConnectorError

OLD, NEW = (18, 16, 1), (26, 9, 2, 1)


@pytest.mark.parametrize(
    "modern, old",
    [
        ("LowCardinality(String)", "String"),
        ("Array(LowCardinality(String))", "Array(String)"),
        ("DateTime64(3)", "DateTime"),
        ("DateTime64(3, 'UTC')", "DateTime"),
        ("Bool", "UInt8"),
        ("Array(Float32)", "Array(Float32)"),
    ],
)
def test_types_adapt_to_the_old_server(modern, old):
    assert adapt_type(modern, OLD) == old
    assert adapt_type(modern, NEW) == modern


def test_create_sql_and_validation():
    t = TableSchema("ev", (Column("a", "UInt8"), Column("b", "LowCardinality(String)")), order_by=("a",),
                    engine="ReplacingMergeTree()")
    assert "`b` String" in t.create_sql(OLD)
    assert "ReplacingMergeTree()" in t.create_sql(NEW)
    with pytest.raises(ValueError, match="unknown columns"):
        TableSchema("ev", (Column("a", "UInt8"),), order_by=("zz",))
    with pytest.raises(ValueError, match="identifier"):
        Column("a; DROP", "UInt8")


def test_quote_escapes():
    assert quote("it's") == "'it\\'s'"
    assert quote([1, "a"]) == "[1, 'a']"
    assert quote(dt.datetime(2026, 1, 2, 3, 4, 5)) == "'2026-01-02 03:04:05'"
    assert quote(None) == "NULL"


def test_version_parsing():
    assert parse_version("18.16.1") == (18, 16, 1)
    assert parse_version('"26.9.2.1"') == (26, 9, 2, 1)


def test_clickhouse_url():
    assert parse_clickhouse_url("clickhouse://u:p%40ss@h:9001/db") == dict(
        host="h", port=9001, user="u", password="p@ss", database="db")
    with pytest.raises(ConnectorError, match="clickhouse://"):
        parse_clickhouse_url("http://h:8123")
