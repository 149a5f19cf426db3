"""``vnx_frames`` keeps one outcome per frame on the ClickHouse 18.16 server too (issue 29): the same
checks as ``tests/unit/connectors/test_frames_table.py`` (chdb), on the server the tests start."""

import pytest

from tests.unit.connectors.test_frames_table import (
    CASES,
    check_concurrent_rebuild,
    check_declared_tables_match,
    check_older_schema_leaves_table,
    check_one_outcome_per_frame,
    check_rebuild_keeps_rows,
    check_taken_backup_name_is_a_config_error,
)
from vidnexus.connectors.clickhouse_store import ClickHouseStore
from vidnexus.operators.frame_version import frame_version, version_sql


@pytest.fixture(scope="module")
def server(clickhouse_url):
    s = ClickHouseStore(clickhouse_url, timeout_s=5)
    assert s.version[:2] == (18, 16)
    yield s
    s.close()


@pytest.mark.parametrize("one_batch", [False, True], ids=["inserts", "one_insert"])
@pytest.mark.parametrize("case", list(CASES))
def test_one_outcome_per_frame(server, case, one_batch):
    check_one_outcome_per_frame(server, case, one_batch)


def test_rebuild_of_an_old_table_keeps_its_rows(server, caplog):
    check_rebuild_keeps_rows(server, caplog)


def test_an_older_schema_never_rebuilds_the_table_back(server):
    check_older_schema_leaves_table(server)


def test_a_taken_backup_name_is_a_config_error(server):
    check_taken_backup_name_is_a_config_error(server)


def test_two_processes_rebuilding_at_once(server):
    check_concurrent_rebuild(server)


def test_tables_that_match_their_schema_are_left_alone(server):
    check_declared_tables_match(server)


def test_the_sql_default_ranks_like_the_python(server):
    for status in ("ok", "partial", "error", "dropped", "late"):
        got = server.query(f"SELECT {version_sql('s')} FROM (SELECT '{status}' AS s)").scalar()
        assert int(got) == frame_version(status, 0.0), status
