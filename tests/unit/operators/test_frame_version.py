"""The ``vnx_frames`` version: the best outcome wins, then the newest (issue 29: a replay dropped as
``late`` turned answered frames into drops, because the last write won)."""

import pytest

from vidnexus.operators.frame_version import STATUS_RANK, TIME_BITS, frame_version, version_sql

T0 = 1_770_000_000.0  # a wall time in 2026


@pytest.mark.parametrize(
    "first, second, winner",
    [
        (("ok", T0), ("dropped", T0 + 60), 0),          # the issue: answered, then replayed and dropped late
        (("dropped", T0), ("ok", T0 + 60), 1),          # dropped, then answered by a replay
        (("ok", T0 + 60), ("dropped", T0), 0),          # whatever the clocks say
        (("dropped", T0), ("dropped", T0 + 0.000001), 1),  # two drops: the newest, to the µs
        (("dropped", T0 + 1), ("dropped", T0), 0),      # newest by decision time, not by write order
        (("ok", T0), ("ok", T0 + 1), 1),                # two answers: the newest
        (("partial", T0 + 60), ("ok", T0), 1),          # all rows beat some rows
        (("partial", T0), ("error", T0 + 60), 0),       # some rows beat none
        (("error", T0), ("dropped", T0 + 60), 0),       # a step that failed beats work not done
        (("dropped", T0), ("mystery", T0 + 1), 1),      # an unknown status ranks as a drop
    ],
)
def test_the_best_outcome_wins_then_the_newest(first, second, winner):
    versions = [frame_version(*first), frame_version(*second)]
    assert versions.index(max(versions)) == winner


def test_ranks_and_bounds():
    assert sorted(STATUS_RANK, key=STATUS_RANK.__getitem__, reverse=True) == ["ok", "partial", "error", "dropped"]
    assert frame_version("ok", 2.5) == (3 << TIME_BITS) + 2_500_000
    assert frame_version("dropped", -5.0) == 0                       # before the epoch: time 0
    assert frame_version("dropped", 1e300) < frame_version("error", 0.0)  # time never spills into the rank
    assert frame_version("ok", 1e300) < 2**64                         # fits UInt64


def test_the_sql_default_ranks_like_the_python():
    """The column DEFAULT (rows from older writers, rows copied by a rebuild) is the version at time 0,
    evaluated by the engine itself."""
    from vidnexus.connectors.chdb_store import ChdbStore

    store = ChdbStore(None)
    try:
        for status in ("ok", "partial", "error", "dropped", "late"):
            got = store.query(f"SELECT {version_sql('s')} FROM (SELECT '{status}' AS s)").scalar()
            assert int(got) == frame_version(status, 0.0), status
    finally:
        store.close()
