"""The pure media decisions, each pinned by a table of hand-built cases taken from the corpus's files."""

import pytest

from vidnexus.streams.media_verdicts import (
    CORRUPT_GRACE,
    MAX_TRIES_WITHOUT_FRAME,
    EndEvidence,
    after_failure,
    classify_source,
    corrupt_problem,
    ends_mid_packet,
    judge_end,
    open_failure_reason,
)

MP4 = "mov,mp4,m4a,3gp,3g2,mj2"


def ev(**kw):
    """A complete 125-frame 25 fps clip, changed by ``kw``."""
    base = dict(packets=125, decoded=125, frame_s=0.04, last_end_s=5.0)
    return EndEvidence(**{**base, **kw})


@pytest.mark.parametrize("name, evidence, state, reason", [
    ("complete mp4", ev(declared_frames=125, declared_end_s=5.0), "done", ""),
    ("complete mkv (duration only)", ev(declared_end_s=5.0), "done", ""),
    ("complete ts (declares nothing)", ev(), "done", ""),
    ("edit-list pre-roll, -ss 6 -t 5 -c copy: 63 shown of 78",
     ev(packets=63, decoded=63, frame_s=0.08, last_end_s=5.04, declared_frames=78, discarded=15,
        declared_end_s=5.04), "done", ""),
    ("pre-roll the container does not mark is missing frames",
     ev(packets=63, decoded=63, declared_frames=78), "failed", "decoded 63 of the 78 frames"),
    ("frame count short, the pre-roll named",
     ev(packets=40, decoded=40, declared_frames=78, discarded=15, declared_end_s=5.04),
     "failed", "decoded 40 of the 78 frames its header declares (15 of them pre-roll never shown)"),
    ("truncated mp4 (moov first)", ev(packets=38, decoded=38, frame_s=0.08, last_end_s=3.04,
                                      declared_frames=377, declared_end_s=30.16),
     "failed", "file is truncated: decoded 38 of the 377 frames its header declares"),
    ("truncated avi: header count, an estimated duration that agrees with the cut",
     ev(packets=21, decoded=21, last_end_s=0.88, declared_frames=125, declared_end_s=0.88), "failed", "of the 125"),
    ("truncated mkv: no count, duration short", ev(packets=33, decoded=33, last_end_s=1.32, declared_end_s=5.0),
     "failed", "file is truncated: its video ends at 1.32 s of the 5.00 s its header declares"),
    ("one frame short is within tolerance", ev(packets=124, decoded=124, last_end_s=4.96, declared_frames=125,
                                               declared_end_s=5.0), "done", ""),
    ("three frames short is not", ev(packets=122, decoded=122, last_end_s=4.88, declared_frames=125,
                                     declared_end_s=5.0), "failed", "decoded 122 of the 125"),
    ("ts cut mid-packet", ev(packets=36, decoded=36, last_end_s=1.52, declared_end_s=1.44, partial_packet=True),
     "failed", "ends inside a container packet after 36 frames"),
    ("ts cut at a packet boundary inside a frame", ev(packets=49, decoded=49, last_end_s=2.0,
                                                      last_frame_corrupt=True),
     "failed", "its last frame (the 49th) is incomplete"),
    ("ts cut exactly between frames: nothing says it was longer", ev(packets=49, decoded=49, last_end_s=2.0),
     "done", ""),
    ("demuxer error", ev(packets=80, decoded=80, demux_error="OSError: Input/output error"),
     "failed", "the demuxer stopped after 80 frames (OSError: Input/output error)"),
    ("nothing decodable", ev(packets=0, decoded=0, last_end_s=None, demux_error="OSError: Input/output error"),
     "failed", "not a decodable video: no frame decoded (0 packets read); the demuxer said: OSError"),
    ("every packet corrupt", ev(packets=10, decoded=0, corrupt=10), "failed", "(10 of 10 packets corrupt)"),
    ("one corrupt packet of 377 is skipped", ev(packets=377, decoded=376, corrupt=1), "done", ""),
    ("40 corrupt packets of 250", ev(packets=250, decoded=210, corrupt=40), "failed",
     "40 of 250 packets are corrupt (more than 10%)"),
    ("keyframes only: 7 decoded of 377 packets", ev(packets=377, decoded=7, frame_s=0.08, last_end_s=30.16,
                                                   declared_frames=377, declared_end_s=30.16), "done", ""),
    ("no end time known", ev(last_end_s=None, declared_end_s=5.0), "done", ""),
])
def test_judge_end(name, evidence, state, reason):
    ending = judge_end(evidence)
    assert ending.state == state, name
    assert reason in ending.reason and (state == "failed") == bool(ending.reason), name


@pytest.mark.parametrize("scheme, fmt, duration, size, kind", [
    ("file", MP4, 5.0, 42_337, "file"),
    ("file", "mpegts", None, 77_644, "file"),
    ("synthetic", "", 2.0, None, "file"),
    ("rtsp", "rtsp", None, None, "live"),
    ("rtsps", "rtsp", 30.0, None, "live"),
    ("http", MP4, 5.04, 228_299, "file"),  # a 5 s MP4 over HTTP plays once
    ("https", "mpegts", None, 77_644, "file"),  # TS over HTTP: no duration, but a length
    ("http", "matroska,webm", 5.0, None, "file"),
    ("http", "hls", 3.0, 310, "playlist"),  # #EXT-X-ENDLIST: VOD
    ("https", "hls", None, 310, "live"),
    ("http", "applehttp", None, None, "live"),
    ("http", "mpjpeg", None, None, "live"),  # an MJPEG camera
    ("http", "flv", None, -38, "live"),  # chunked: no length
])
def test_classify_source(scheme, fmt, duration, size, kind):
    assert classify_source(scheme, fmt, duration, size) == kind


@pytest.mark.parametrize("fmt, size, cut", [
    ("mpegts", 188 * 340, False),
    ("mpegts", 192 * 100, False),  # M2TS
    ("mpegts", 204 * 7, False),
    ("mpegts", 188 * 100 + 77, True),
    ("mpegts", None, False),
    ("mpegts", -38, False),
    ("matroska,webm", 188 * 100 + 77, False),
])
def test_ends_mid_packet(fmt, size, cut):
    assert ends_mid_packet(fmt, size) is cut


@pytest.mark.parametrize("corrupt, packets, final, problem", [
    (0, 0, True, None),
    (0, 377, True, None),
    (1, 2, False, None),  # a bad first packet: too early to judge
    (1, 2, True, "1 of 2 packets are corrupt (more than 10%)"),
    (1, 250, True, None),
    (25, 250, True, None),
    (26, 250, True, "26 of 250"),
    (CORRUPT_GRACE - 1, CORRUPT_GRACE, False, None),
    (CORRUPT_GRACE, 151, False, "25 of 151 packets are corrupt"),
    (CORRUPT_GRACE, 300, False, None),
])
def test_corrupt_problem(corrupt, packets, final, problem):
    got = corrupt_problem(corrupt, packets, final=final)
    assert got == problem if problem is None else problem in got


N = MAX_TRIES_WITHOUT_FRAME


@pytest.mark.parametrize("scheme, kind, tries, action, suffix", [
    ("file", None, 1, "fail", ""),  # a path that cannot be opened
    ("file", "file", 1, "fail", ""),
    ("synthetic", None, 1, "fail", ""),
    ("http", "file", 0, "fail", ""),  # an HTTP file that failed after frames: it was read once
    ("https", "playlist", 1, "fail", ""),
    ("http", None, 1, "retry", ""),  # never opened: may be a camera coming up
    ("http", None, N - 1, "retry", ""),
    ("http", None, N, "fail", f"(gave up after {N} attempts without a frame)"),
    ("http", "live", N, "fail", f"(gave up after {N} attempts without a frame)"),  # live HLS, no frame
    ("http", "live", 0, "retry", ""),  # a live source that produced frames: a camera
    ("rtsp", None, 100, "retry", ""),  # cameras reboot: retried for as long as it takes
    ("rtsp", "live", 100, "retry", ""),
])
def test_after_failure(scheme, kind, tries, action, suffix):
    d = after_failure(scheme, kind, tries, "u: cannot open (X)")
    assert d.action == action and d.reason == "u: cannot open (X)" + (f" {suffix}" if suffix else "")


@pytest.mark.parametrize("etype, message, elapsed, reading, reason", [
    ("InvalidDataError", "Invalid data found when processing input", 5.01, False, "no answer within 5 s"),  # RTSP
    ("ExitError", "Immediate exit requested", 5.0, False, "no answer within 5 s"),  # HTTP
    ("ExitError", "Immediate exit requested", 0.0, True, "no data within 5 s"),
    ("ConnectionRefusedError", "Connection refused", 0.01, False, "ConnectionRefusedError: Connection refused"),
    ("InvalidDataError", "Invalid data found when processing input", 0.2, False,
     "InvalidDataError: Invalid data found when processing input"),
])
def test_open_failure_reason(etype, message, elapsed, reading, reason):
    assert open_failure_reason(etype, message, elapsed, 5.0, reading=reading) == reason
