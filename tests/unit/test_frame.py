import msgpack
import numpy as np
import pytest

from vidnexus.errors import CodecError
from vidnexus.contracts.frames import Frame, decode_frame, encode_frame
from vidnexus.streams.images import image_of, jpeg_encode
from vidnexus.streams.sampling import EveryNth, FpsSampler


def make_frame(**kw):
    base = dict(stream_id="cam", frame_no=3, pts=0.3, capture_ts=1.0, ingest_ts=1.1, width=2, height=1,
                encoding="raw", data=bytes(6), tags={"a": "b"})
    base.update(kw)
    return Frame(**base)


def test_round_trip():
    f = make_frame()
    assert decode_frame(encode_frame(f)) == f


@pytest.mark.parametrize("raw, match", [
    (b"\xc1garbage", "malformed"),
    (msgpack.packb([99, "x"]), "unknown frame message version 99"),
    (msgpack.packb([2, "frame", "x"]), "1 fields, expected 10"),
    (msgpack.packb([2, "rows", "x"]), "kind 'rows'"),
    (msgpack.packb({"a": 1}), "malformed"),
])
def test_bad_messages_are_codec_errors(raw, match):
    with pytest.raises(CodecError, match=match):
        decode_frame(raw)


def test_jpeg_round_trip_and_max_side():
    img = np.zeros((100, 200, 3), np.uint8)
    img[:, 100:] = 255
    data = jpeg_encode(img, quality=90, max_side=50)
    f = make_frame(encoding="jpeg", data=data, width=50, height=25)
    out = image_of(f)
    assert out.shape == (25, 50, 3)
    assert out[:, :20].mean() < 30 and out[:, 30:].mean() > 220


def test_fps_sampling_from_12_5_to_2_fps():
    s = FpsSampler(2.0)
    kept = [i for i in range(377) if s.keep(i / 12.5, i)]  # 30.16 s of video
    assert len(kept) == 61
    assert all(abs(i / 12.5 - k / 2.0) < 0.08 for k, i in enumerate(kept))


def test_every_nth_and_bad_fps():
    assert [i for i in range(10) if EveryNth(3).keep(0, i)] == [0, 3, 6, 9]
    with pytest.raises(ValueError):
        FpsSampler(0)
