import pytest

from vidnexus.connectors.chdb_store import ChdbStore


@pytest.fixture
def store(tmp_path):
    """A real embedded store, closed after the test: chdb serves one data directory per process, so a
    store left to the garbage collector (a supervisor's closure keeps it in a cycle) would refuse the
    next test's directory."""
    s = ChdbStore(tmp_path / "db")
    yield s
    s.close()
