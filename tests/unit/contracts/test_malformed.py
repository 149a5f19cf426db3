"""Every decoder, fed malformed records of its own kind, either reads them or raises CodecError:
never another exception that would stop the role reading the topic (issue 19 item 3)."""

from __future__ import annotations

import random

import pytest

from tests.reliability.malformed_corpus import mutations, undecodable, valid
from vidnexus.errors import CodecError


@pytest.mark.parametrize("source", list(valid()))
def test_decoders_read_or_raise_codec_error(source):
    raw, decode = valid()[source]
    decode(raw)  # the valid record reads
    refused = 0
    for bad in mutations(raw, random.Random(source)):
        try:
            decode(bad)
        except CodecError:
            refused += 1
        except Exception as e:  # noqa: BLE001 - the point of the test
            pytest.fail(f"{source}: {type(e).__name__}: {e} on {bad[:200]!r}")
    assert refused > 20
    assert len(undecodable(source, 10)) == 10
