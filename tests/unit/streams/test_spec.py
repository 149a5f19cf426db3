"""StreamSpec validation and the URL rules of the registry's door: tables of cases."""

import math

import pytest

from vidnexus.errors import StreamError
from vidnexus.streams.spec import StreamSpec, local_path, normalize_url, spec_problem, url_scheme

URL = "/v/a.mp4"


@pytest.mark.parametrize("options, problem", [
    ({}, None),
    ({"fps": 2.5}, None),
    ({"fps": 1000}, None),
    ({"every_n": 2**32 - 1}, None),
    ({"keyframes_only": True}, None),
    ({"keyframes_only": True, "every_n": 3}, None),  # every 3rd keyframe
    ({"jpeg_quality": 1, "max_side": 16}, None),
    ({"fps": math.inf}, "stream cam: fps=inf is not allowed; use a finite number > 0 and <= 1000"),
    ({"fps": -math.inf}, "fps=-inf"),
    ({"fps": math.nan}, "fps=nan"),
    ({"fps": 0.0}, "fps=0.0"),
    ({"fps": -1.0}, "fps=-1.0"),
    ({"fps": 1000.5}, "fps=1000.5"),
    ({"fps": "2"}, "fps='2'"),
    ({"fps": True}, "fps=True"),
    ({"every_n": 0}, "every_n=0 is not allowed; use a whole number from 1 to 4294967295"),
    ({"every_n": 2**32 + 1}, "every_n=4294967297"),  # would wrap to 1 in the UInt32 column
    ({"every_n": 2.0}, "every_n=2.0"),
    ({"fps": 2.0, "every_n": 3}, "fps=2.0 and every_n=3 are both given"),
    ({"fps": 2.0, "keyframes_only": True}, "fps=2.0 and keyframes_only are both given"),
    ({"jpeg_quality": 0}, "jpeg_quality=0 is not allowed; use a whole number from 1 to 100"),
    ({"jpeg_quality": 101}, "jpeg_quality=101"),
    ({"max_side": 1}, "max_side=1 is not allowed; use a whole number of pixels from 16 to 16384"),
    ({"max_side": 20000}, "max_side=20000"),
    ({"skip_corrupt": "yes"}, "skip_corrupt='yes'"),
    ({"apps": ("",)}, "apps=('',)"),
    ({"tags": {"": "x"}}, "tags="),
    ({"name": ""}, "stream name '' is not allowed"),
    ({"name": "a b"}, "stream name 'a b'"),
    ({"name": "x" * 201}, "is not allowed; use 1-200 letters"),
    ({"url": ""}, "stream cam: empty URL"),
    ({"url": " "}, "stream cam: empty URL"),
    ({"url": "ftp://h/a.mp4"}, "stream cam: unsupported URL scheme 'ftp'"),
    ({"url": "file://host/a.mp4"}, "not host 'host'"),
])
def test_spec_validation(options, problem):
    options = {"name": "cam", "url": URL, **options}
    name, url = options.pop("name"), options.pop("url")
    if problem is None:
        StreamSpec(name, url, **options)
        return
    with pytest.raises(StreamError) as e:
        StreamSpec(name, url, **options)
    assert problem in str(e.value) and "\n" not in str(e.value)
    assert spec_problem(StreamSpec(name, url, check=False, **options)) == str(e.value)


@pytest.mark.parametrize("options, sampling", [
    ({}, (1.0, None, False)),  # no sampling option: 1 fps, as the CLI always did
    ({"fps": 4.0}, (4.0, None, False)),
    ({"every_n": 5}, (None, 5, False)),
    ({"keyframes_only": True}, (None, None, True)),
])
def test_default_sampling_is_one_fps_only_without_another_option(options, sampling):
    s = StreamSpec("cam", URL, **options)
    assert (s.fps, s.every_n, s.keyframes_only) == sampling


def test_unchecked_specs_hold_what_was_stored():
    s = StreamSpec("cam", URL, fps=math.inf, check=False)
    assert s.fps == math.inf and spec_problem(s) is not None


@pytest.mark.parametrize("url, cwd, want", [
    ("clips/a.mp4", "/home/me", "/home/me/clips/a.mp4"),
    ("./a.mp4", "/home/me", "/home/me/a.mp4"),
    ("../shared/a.mp4", "/home/me/work", "/home/me/shared/a.mp4"),
    ("/abs/a.mp4", "/home/me", "/abs/a.mp4"),
    ("file:///v/my%20clip%23.mp4", "/home/me", "/v/my clip#.mp4"),
    ("file://localhost/v/a.mp4", "/home/me", "/v/a.mp4"),
    ("a%20b.mp4", "/home/me", "/home/me/a%20b.mp4"),  # a plain path is taken as typed
    ("rtsp://10.0.0.5/s1", "/home/me", "rtsp://10.0.0.5/s1"),
    ("https://h/a%20b.mp4", "/home/me", "https://h/a%20b.mp4"),
    ("synthetic://hud?fps=5", "/home/me", "synthetic://hud?fps=5"),
    ("", "/home/me", StreamError("empty URL")),
    ("   ", "/home/me", StreamError("empty URL")),
    ("file://", "/home/me", StreamError("names no path")),
    ("file://cam7/v.mp4", "/home/me", StreamError("not host 'cam7'")),
    ("gopher://h/v", "/home/me", StreamError("unsupported URL scheme 'gopher'")),
])
def test_normalize_url(url, cwd, want):
    if isinstance(want, Exception):
        with pytest.raises(StreamError, match=str(want)):
            normalize_url(url, cwd)
    else:
        assert normalize_url(url, cwd) == want


@pytest.mark.parametrize("url, scheme, path", [
    ("/v/a.mp4", "file", "/v/a.mp4"),
    ("v/a.mp4", "file", "v/a.mp4"),
    ("file:///v/a%2Bb.mp4", "file", "/v/a+b.mp4"),
    ("C:\\v\\a.mp4", "file", "C:\\v\\a.mp4"),
    ("rtsps://h/s", "rtsps", "rtsps://h/s"),
    ("synthetic://game", "synthetic", "synthetic://game"),
])
def test_url_scheme_and_local_path(url, scheme, path):
    assert url_scheme(url) == scheme and local_path(url) == path
