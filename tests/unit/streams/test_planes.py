"""Decoded video frames reach the JPEG encoder as the decoder's YUV 4:2:0 planes (issue 18 item 7):
the JPEG is the same picture as the BGR path's (within JPEG noise), its size in the frame header is
its real size (max_side included), and odd-sized or non-4:2:0 sources fall back to BGR."""

from __future__ import annotations

import av
import cv2
import numpy as np
import pytest

from tests.unit.streams.media import CAR, frames_of, make_clip
from vidnexus.connectors.memory_bus import MemoryBus
from vidnexus.streams.images import Planes, encoded_size, image_of, jpeg_encode
from vidnexus.streams.ingest import StreamSpec, StreamWorker
from vidnexus.streams.sources import open_source


def _decode(data: bytes) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)


def test_a_real_videos_frames_come_as_planes_and_encode_like_bgr():
    """Video-range H.264 (Y 16–235) stretched to JPEG's full range: the same picture as swscale's
    BGR conversion of the same frames, within JPEG noise (0.91 per channel here; left as video range
    the blacks would be dark grey and the mean error 1.45, over the bound)."""
    src = open_source(CAR)
    raws = []
    for raw in src.frames():
        raws.append(raw)
        if len(raws) == 5:
            break
    container = av.open(CAR)
    bgr = [f.to_ndarray(format="bgr24") for _, f in zip(range(5), container.decode(video=0))]
    container.close()
    assert all(isinstance(r.image, Planes) for r in raws) and raws[0].image.shape == (432, 768, 3)
    for r, ref in zip(raws, bgr):
        via_planes = _decode(jpeg_encode(r.image, 95)).astype(int)
        via_bgr = _decode(jpeg_encode(ref, 95)).astype(int)
        assert via_planes.shape == via_bgr.shape == (432, 768, 3)
        assert np.abs(via_planes - via_bgr).mean() < 1.2, np.abs(via_planes - via_bgr).mean()
        assert np.abs(r.image.to_bgr().astype(int) - ref).mean() < 2.0
    small = jpeg_encode(raws[0].image, 85, max_side=301)
    assert _decode(small).shape[:2][::-1] == encoded_size(raws[0].image, 301) == (300, 168)


@pytest.mark.parametrize("codec", ["libx264", "png"])
def test_ingest_headers_match_the_jpegs(tmp_path, codec):
    clip = make_clip(tmp_path / ("c.mkv" if codec == "libx264" else "c.mov"), frames=10, size=64, codec=codec,
                     pix_fmt="yuv420p" if codec == "libx264" else "rgb24")
    bus = MemoryBus()
    st = StreamWorker(StreamSpec("c", str(clip), every_n=1, max_side=40), bus, "f").run()
    assert st.state == "done" and st.published == 10
    for f in frames_of(bus):
        img = image_of(f)
        assert (f.width, f.height) == (img.shape[1], img.shape[0])
    raw = next(iter(open_source(str(clip)).frames()))
    assert isinstance(raw.image, Planes) == (codec == "libx264")  # RGB sources: BGR


def test_planes_of_a_padded_decoder_frame_are_its_pixels(tmp_path):
    # 100 pixels wide: the decoder pads its rows (128 bytes); the planes are strided views of its
    # buffers and the message carries exactly the I420 pixels PyAV's own conversion gives.
    import av
    import numpy as np

    from vidnexus.contracts.frames import Frame, decode_frame, encode_frame
    from vidnexus.streams.images import frame_payload, planes_of_frame

    clip = make_clip(tmp_path / "c.mkv", frames=3, size=100)
    with av.open(str(clip)) as c:
        for frame in c.decode(video=0):
            planes = planes_of_frame(frame)
            assert planes.y.strides[0] > 100  # padded: a view, not a copy
            enc, data, w, h = frame_payload(planes, uncompressed=True)
            f = decode_frame(encode_frame(Frame("c", 0, 0.0, 0.0, 0.0, w, h, enc, data)))
            assert f.data == frame.to_ndarray().tobytes()  # Y, U, V without the padding
