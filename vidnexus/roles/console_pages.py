"""The web console: server-rendered pages over the console's API (``vidnexus console``,
``vidnexus run --console-port``; docs/api.md "Web console").

Pages: streams (status, sampled and decoded fps, time since the last frame, a live thumbnail of the
latest sampled frame with the app's overlays, add / pause / resume / remove), sessions and the plan
(which executor serves what, batch, p50/p99, SLO attainment, drops by reason), each app's charts
from its own SQL, and a SQL console whose results come back as a table and a chart. Everything is
in the package: HTML and SVG made here, one small inline script (thumbnails refresh every 2 s); no
CDN, no fetch of anything from elsewhere at run time.

Signing in: the read token or the admin token, entered once on ``/login``, kept in an HttpOnly,
SameSite=Strict cookie; changes need the admin token. Wrong tokens count toward the API's
per-address back-off.

Example (the chart a result gets):
    >>> svg = chart_svg(["stream", "minute", "vehicles"], ["String", "UInt32", "UInt64"],
    ...                 [["a", 0, 3], ["a", 1, 5], ["b", 0, 2], ["b", 1, 4]])
    >>> svg.startswith("<svg") and svg.count("<polyline") == 2
    True
    >>> chart_svg(["x"], ["String"], [["a"]]) is None
    True
"""

from __future__ import annotations

import html
import logging
import math
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import parse_qs, quote

from vidnexus.clock import wall_time as wall
from vidnexus.connectors.bus import Bus
from vidnexus.contracts.frames import Frame, decode_frame
from vidnexus.contracts.rows import decode_rows
from vidnexus.contracts.topics import Topics
from vidnexus.errors import CodecError, VidnexusError

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

__all__ = ["FrameTap", "ConsoleOps", "mount_pages", "chart_svg", "draw_overlays", "COOKIE"]

logger = logging.getLogger(__name__)

COOKIE = "vnx_console"
"""The cookie that holds the token a person signed in with."""

_HIDDEN_COLUMNS = {"stream", "frame_no", "row_idx", "version", "pts", "latency_ms", "ingest_ts", "capture_ts"}
"""Columns a frame's overlay does not print (identity and timing)."""


# -- the latest frames and their rows -------------------------------------------------------------

@dataclass
class _Seen:
    frames: "deque[bytes]"
    """The newest frame messages, undecoded (decoding copies the image: done only for a thumbnail)."""
    rows: "OrderedDict[int, dict[str, list[dict[str, Any]]]]"
    """Rows by frame number, for the newest frames that produced some."""


_ROWS_KEPT = 64
"""Frames per stream whose rows are kept (rows come after their frame, by the worker's delay)."""


class FrameTap:
    """The latest sampled frames of each stream and the rows each produced, read from the frames and
    rows topics by a thread of its own (from now on, no consumer group: it takes nothing from the
    workers or the sink). Keeps the newest ``keep`` frame messages per stream as they came (a frame
    is decoded only when its thumbnail is asked for); a thumbnail is the newest of them whose rows
    have come (else the newest), with the rows drawn on it.

    Example:
        >>> from vidnexus.connectors.memory_bus import MemoryBus
        >>> from vidnexus.contracts.frames import encode_frame
        >>> bus, t = MemoryBus(), Topics("doc")
        >>> tap = FrameTap(bus, t, poll_s=0.01)
        >>> bus.publish(t.frames, b"cam", encode_frame(Frame("cam", 7, 0.0, 0.0, 0.0, 4, 2, "raw", bytes(24))))
        >>> tap.wait_for("cam", 5.0).frame_no
        7
        >>> tap.close()
    """

    def __init__(self, bus: Bus, topics: Topics, *, keep: int = 4, poll_s: float = 0.2,
                 forget_s: float = 600.0) -> None:
        self.topics, self.keep, self.poll_s, self.forget_s = topics, keep, poll_s, forget_s
        self._consumer = bus.subscribe([topics.frames, topics.rows], group=None, from_beginning=False)
        self._lock = threading.Condition()
        self._seen: dict[str, _Seen] = {}
        self._last: dict[str, float] = {}  # stream → wall time its newest frame came
        self.malformed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="vnx-console-tap")
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    batch = self._consumer.poll(timeout_s=self.poll_s)
                except VidnexusError:
                    self._stop.wait(1.0)  # the bus is away: try again (the console goes on without thumbnails)
                    continue
                self._take(batch)
                self._forget_idle()
        except Exception:  # never silently: a reader that stops holds the in-memory bus's frames
            logger.exception("console: the frame tap stopped; thumbnails stop with it")
            self._consumer.close()

    def _forget_idle(self) -> None:
        """Drop what is kept of streams with no frame for ``forget_s`` (removed, or ended)."""
        now = wall()
        with self._lock:
            for stream in [s for s, t in self._last.items() if now - t > self.forget_s]:
                self._last.pop(stream, None)
                self._seen.pop(stream, None)

    def _take(self, batch: Sequence[Any]) -> None:
        for m in batch:
            try:
                if m.topic == self.topics.frames:
                    stream = m.key.decode() if m.key else decode_frame(m.value).stream_id
                    with self._lock:
                        self._entry(stream).frames.append(m.value)
                        self._last[stream] = wall()
                        self._lock.notify_all()
                else:
                    self._rows(*decode_rows(m.value))
            except (CodecError, UnicodeDecodeError):
                self.malformed += 1

    def _entry(self, stream: str) -> _Seen:
        e = self._seen.get(stream)
        if e is None:
            e = self._seen[stream] = _Seen(deque(maxlen=self.keep), OrderedDict())
        return e

    def _rows(self, rows: Mapping[str, list[tuple[Any, ...]]], schemas: Mapping[str, Any]) -> None:
        with self._lock:
            for table, rs in rows.items():
                names = [c.name for c in schemas[table].columns]
                for r in rs:
                    d = dict(zip(names, r))
                    stream, no = d.get("stream"), d.get("frame_no")
                    if stream is None or no is None:
                        continue
                    e = self._entry(str(stream))
                    e.rows.setdefault(int(no), {}).setdefault(table, []).append(d)
                    while len(e.rows) > _ROWS_KEPT:
                        e.rows.popitem(last=False)

    def last_frame_wall(self, stream: str) -> float | None:
        """When the newest frame of ``stream`` came (wall clock), None if none did."""
        with self._lock:
            return self._last.get(stream)

    def latest(self, stream: str) -> tuple[Frame, dict[str, list[dict[str, Any]]]] | None:
        """The newest kept frame whose rows came (else the newest frame) and its rows by table."""
        with self._lock:
            e = self._seen.get(stream)
            if e is None or not e.frames:
                return None
            raws, rows = list(e.frames), {no: dict(r) for no, r in e.rows.items()}
        frames = []
        for raw in reversed(raws):
            try:
                frames.append(decode_frame(raw))
            except CodecError:
                continue
        for f in frames:
            if f.frame_no in rows:
                return f, rows[f.frame_no]
        return (frames[0], {}) if frames else None

    def wait_for(self, stream: str, timeout_s: float) -> Frame | None:
        """The newest frame of ``stream``, waiting up to ``timeout_s`` for one (tests)."""
        end = wall() + timeout_s
        with self._lock:
            while (e := self._seen.get(stream)) is None or not e.frames:
                left = end - wall()
                if left <= 0:
                    return None
                self._lock.wait(left)
            raw = e.frames[-1]
        return decode_frame(raw)

    def thumbnail(self, stream: str, width: int = 360) -> bytes | None:
        """A JPEG of the latest frame with its rows drawn on it, ``width`` pixels wide."""
        import cv2

        from vidnexus.streams.images import image_of

        got = self.latest(stream)
        if got is None:
            return None
        frame, rows = got
        try:
            img = image_of(frame).copy()
        except CodecError:
            return None
        img = draw_overlays(img, rows)
        h, w = img.shape[:2]
        if w > width:
            img = cv2.resize(img, (width, max(1, round(h * width / w))), interpolation=cv2.INTER_AREA)
        ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 80])
        return bytes(buf) if ok else None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._consumer.close()


def draw_overlays(img: Any, rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> Any:
    """Draw a frame's rows on its image (BGR, in place): a box with its track id and colour read
    for rows with ``x1, y1, x2, y2`` (and the visible landmarks of its ``keypoints``, x, y,
    visibility triples: a person's pose); points for ``kp_read`` (x, y pairs: a pose); and a caption of
    the other rows' values (HUD reads, scores, moves) along the top.

        >>> import numpy as np
        >>> img = draw_overlays(np.zeros((60, 80, 3), np.uint8),
        ...                     {"t": [{"x1": 10, "y1": 10, "x2": 40, "y2": 40, "track_id": 3}]})
        >>> int(img[10, 25].max()) > 0   # the box's top edge
        True
        >>> img = draw_overlays(np.zeros((60, 80, 3), np.uint8), {"people_sightings": [
        ...     {"x1": 10, "y1": 10, "x2": 40, "y2": 50, "keypoints": [25.0, 30.0, 0.9, 70.0, 5.0, 0.1]}]})
        >>> int(img[30, 25].max()) > 0, int(img[5, 70].max())   # the visible landmark only
        (True, 0)
    """
    import cv2

    h, w = img.shape[:2]
    scale = max(0.35, min(w, h) / 700)
    thick = max(1, round(scale * 2))
    caption: list[str] = []
    for table, rs in rows.items():
        if table == "vnx_frames":
            for r in rs:
                if r.get("status") and r.get("status") != "ok":
                    caption.append(f"frame {r.get('status')} {r.get('reasons') or ''}".strip())
            continue
        boxed = [r for r in rs if all(k in r for k in ("x1", "y1", "x2", "y2"))]
        if boxed:
            counted = sum(1 for r in boxed if r.get("counts"))
            caption.append(f"{len(boxed)} tracked" + (f", {counted} counted" if "counts" in boxed[0] else "")
                           + "".join(f" | crossed {', '.join(map(str, r['crossings']))} #{r.get('track_id', '')}"
                                     for r in boxed if r.get("crossings")))
        for r in rs:
            if all(k in r for k in ("x1", "y1", "x2", "y2")):
                if not all(_num(r[k]) is not None for k in ("x1", "y1", "x2", "y2")):
                    continue  # a row without a usable box: nothing to draw
                p1 = (int(max(0, min(w - 1, float(r["x1"])))), int(max(0, min(h - 1, float(r["y1"])))))
                p2 = (int(max(0, min(w - 1, float(r["x2"])))), int(max(0, min(h - 1, float(r["y2"])))))
                colour = (0, 220, 255) if r.get("counts") else (60, 255, 60)
                cv2.rectangle(img, p1, p2, colour, thick)
                label = " ".join(str(x) for x in (f"#{r['track_id']}" if "track_id" in r else "", r.get("colour", ""))
                                 if x)
                if label:
                    cv2.putText(img, label, (p1[0], max(12, p1[1] - 4)), cv2.FONT_HERSHEY_SIMPLEX, scale,
                                colour, thick, cv2.LINE_AA)
                pose = r.get("keypoints")  # the people app: x, y, visibility per landmark
                if isinstance(pose, (list, tuple)):
                    for x, y, v in zip(pose[0::3], pose[1::3], pose[2::3]):
                        if None not in (_num(x), _num(y), _num(v)) and float(v) >= 0.5:
                            cv2.circle(img, (int(x), int(y)), max(2, thick + 1), (255, 80, 255), -1, cv2.LINE_AA)
                continue
            kp = r.get("kp_read")
            if isinstance(kp, (list, tuple)) and len(kp) >= 2:
                for x, y in zip(kp[0::2], kp[1::2]):
                    if _num(x) is None or _num(y) is None:
                        continue
                    cv2.circle(img, (int(x), int(y)), max(2, thick + 1), (255, 80, 255), -1, cv2.LINE_AA)
            shown = [f"{k.removesuffix('_read')} {_short(v)}" for k, v in r.items()
                     if k not in _HIDDEN_COLUMNS and k != "kp_read" and "truth" not in k
                     and not isinstance(v, (list, tuple, dict))][:6]
            if shown:
                caption.append(" ".join(shown))
    for i, text in enumerate(caption[:4]):
        y = int(18 * scale / 0.5) * (i + 1)
        cv2.putText(img, text, (6, y), cv2.FONT_HERSHEY_SIMPLEX, scale, (0, 0, 0), thick + 2, cv2.LINE_AA)
        cv2.putText(img, text, (6, y), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255), thick, cv2.LINE_AA)
    return img


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.2f}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)[:16]


# -- charts ---------------------------------------------------------------------------------------

_NUMERIC = ("Int", "UInt", "Float", "Decimal")
_X_NAMES = {"minute", "second", "hour", "day", "time", "ts", "t", "pts", "epoch", "bucket", "beat", "frame_no"}
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
            "#17becf")


def _is_numeric(t: str) -> bool:
    t = t.removeprefix("Nullable(").removeprefix("LowCardinality(")
    return t.startswith(_NUMERIC)


def _is_x(name: str, t: str) -> bool:
    return name.lower() in _X_NAMES or t.startswith(("Date", "DateTime"))


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def chart_svg(columns: Sequence[str], types: Sequence[str], rows: Sequence[Sequence[Any]], *,
              width: int = 640, height: int = 240) -> str | None:
    """An inline SVG chart of a query's result, or None when it has nothing to plot.

    A column named like time (``minute``, ``second``, ``ts``, …, or a Date/DateTime) is the x axis
    of a line chart: one line per value of the first text column (``stream``) with the first other
    number as y, or one line per other number. Else, a text column first and a number after it: a
    bar per row. Else, all numbers: lines over the first column."""
    if not rows or not columns:
        return None
    numeric = [i for i, t in enumerate(types) if _is_numeric(t)]
    text = [i for i in range(len(columns)) if i not in numeric]
    xs = [i for i in range(len(columns)) if _is_x(columns[i], types[i])]
    series: dict[str, list[tuple[Any, float]]] = {}
    if xs:
        x = xs[0]
        ys = [i for i in numeric if i != x]
        if not ys:
            return None
        cat = next((i for i in text if i != x), None)
        for r in rows:
            if cat is not None:
                y = _num(r[ys[0]])
                if y is not None:
                    series.setdefault(str(r[cat]), []).append((r[x], y))
            else:
                for i in ys[:6]:
                    y = _num(r[i])
                    if y is not None:
                        series.setdefault(columns[i], []).append((r[x], y))
        return _lines(series, columns[x], columns[ys[0]] if cat is not None else "", width, height)
    if text and numeric and text[0] < numeric[0]:
        bars = [(str(r[text[0]]), _num(r[numeric[0]])) for r in rows[:40]]
        return _bars([(k, v) for k, v in bars if v is not None], columns[numeric[0]], width, height)
    if len(numeric) >= 2 and numeric[0] == 0:
        for r in rows:
            for i in numeric[1:7]:
                y = _num(r[i])
                if y is not None:
                    series.setdefault(columns[i], []).append((r[0], y))
        return _lines(series, columns[0], "", width, height)
    return None


def _xval(v: Any) -> float:
    f = _num(v)
    if f is not None:
        return f
    if hasattr(v, "timestamp"):
        return float(v.timestamp())
    return 0.0


def _frame_svg(width: int, height: int, body: list[str], legend: list[tuple[str, str]]) -> str:
    items = "".join(f'<g transform="translate({8 + 130 * (k % 4)},{height - 8 - 16 * (k // 4)})">'
                    f'<rect width="10" height="10" y="-9" fill="{c}"/><text x="14" font-size="11">'
                    f'{html.escape(name[:18])}</text></g>' for k, (name, c) in enumerate(legend[:12]))
    return (f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img">{"".join(body)}{items}</svg>')


def _lines(series: Mapping[str, Sequence[tuple[Any, float]]], xname: str, yname: str, width: int,
           height: int) -> str | None:
    pts = [p for s in series.values() for p in s]
    if not pts:
        return None
    legend_rows = (min(len(series), 12) + 3) // 4 if len(series) > 1 else 0
    left, right, top, bottom = 52, 12, 12, 34 + 16 * legend_rows
    x0, x1 = min(_xval(p[0]) for p in pts), max(_xval(p[0]) for p in pts)
    y0, y1 = min(0.0, min(p[1] for p in pts)), max(p[1] for p in pts)
    x1, y1 = (x1 if x1 > x0 else x0 + 1), (y1 if y1 > y0 else y0 + 1)
    pw, ph = width - left - right, height - top - bottom

    def sx(v: Any) -> float:
        return left + (_xval(v) - x0) / (x1 - x0) * pw

    def sy(v: float) -> float:
        return top + ph - (v - y0) / (y1 - y0) * ph

    body = [f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#888"/>',
            f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="#888"/>']
    for k in range(5):
        v = y0 + (y1 - y0) * k / 4
        body.append(f'<text x="{left - 4}" y="{sy(v) + 4:.1f}" font-size="10" text-anchor="end">{_short(v)}</text>'
                    f'<line x1="{left}" y1="{sy(v):.1f}" x2="{left + pw}" y2="{sy(v):.1f}" stroke="#eee"/>')
    body.append(f'<text x="{left}" y="{top + ph + 14}" font-size="10">{html.escape(_short(x0))}</text>'
                f'<text x="{left + pw}" y="{top + ph + 14}" font-size="10" text-anchor="end">{html.escape(_short(x1))}</text>'
                f'<text x="{left + pw / 2}" y="{top + ph + 14}" font-size="11" text-anchor="middle">'
                f'{html.escape(xname)}{" → " + html.escape(yname) if yname else ""}</text>')
    legend = []
    for k, (name, s) in enumerate(sorted(series.items())):
        c = _PALETTE[k % len(_PALETTE)]
        line = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in sorted(s, key=lambda p: _xval(p[0])))
        body.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="{line}"/>')
        if len(s) <= 60:  # points too, so that a series of one point shows
            body.extend(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{c}"/>' for x, y in s)
        legend.append((name, c))
    return _frame_svg(width, height, body, legend if len(series) > 1 else [])


def _bars(bars: Sequence[tuple[str, float]], yname: str, width: int, height: int) -> str | None:
    if not bars:
        return None
    left, right, top, bottom = 52, 12, 12, 40
    y0, y1 = min(0.0, min(v for _, v in bars)), max(0.0, max(v for _, v in bars))
    y1 = y1 if y1 > y0 else y0 + 1
    pw, ph = width - left - right, height - top - bottom
    bw = min(80.0, pw / len(bars))

    def sy(v: float) -> float:
        return top + ph - (v - y0) / (y1 - y0) * ph

    body = [f'<line x1="{left}" y1="{sy(0):.1f}" x2="{left + pw}" y2="{sy(0):.1f}" stroke="#888"/>']
    for k in range(5):
        v = y0 + (y1 - y0) * k / 4
        body.append(f'<text x="{left - 4}" y="{sy(v) + 4:.1f}" font-size="10" text-anchor="end">{_short(v)}</text>')
    for k, (name, v) in enumerate(bars):
        x = left + k * bw
        top_y, bot_y = sorted((sy(v), sy(0)))
        body.append(f'<rect x="{x + bw * 0.1:.1f}" y="{top_y:.1f}" width="{bw * 0.8:.1f}" height="{bot_y - top_y:.1f}" '
                    f'fill="{_PALETTE[0]}"><title>{html.escape(name)}: {_short(v)}</title></rect>'
                    f'<text x="{x + bw / 2:.1f}" y="{top + ph + 14}" font-size="10" text-anchor="middle">'
                    f'{html.escape(name[:max(3, int(bw / 6))])}</text>')
    body.append(f'<text x="{left + pw / 2}" y="{height - 6}" font-size="11" text-anchor="middle">{html.escape(yname)}</text>')
    return _frame_svg(width, height, body, [])


# -- pages ----------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2733;background:#f6f7f9}
header{background:#1d2733;color:#fff;padding:10px 18px;display:flex;gap:18px;align-items:center}
header a{color:#cfe3ff;text-decoration:none}header a.on{color:#fff;font-weight:600}
header .who{margin-left:auto;font-size:13px;color:#aab}
main{padding:16px 18px;max-width:1280px}
table{border-collapse:collapse;background:#fff;margin:8px 0 16px}
th,td{border:1px solid #dde1e6;padding:4px 8px;font-size:13px;text-align:left;vertical-align:top}
th{background:#eef1f5}
.cards{display:flex;flex-wrap:wrap;gap:14px}
.card{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:10px;width:380px}
.card img{width:360px;min-height:80px;background:#222;display:block}
.card h3{margin:0 0 6px;font-size:16px}
.state-enabled{color:#137333}.state-paused{color:#b06000}.state-removed{color:#a50e0e}
.err{background:#fde7e9;border:1px solid #f3b0b7;padding:8px;margin:8px 0}
.ok{background:#e6f4ea;border:1px solid #a8dab5;padding:8px;margin:8px 0}
form.inline{display:inline}
textarea{width:100%;max-width:900px;font-family:monospace}
.chart{background:#fff;border:1px solid #dde1e6;margin:6px 0}
small{color:#667}
"""

_REFRESH_JS = """
setInterval(function(){document.querySelectorAll('img[data-live]').forEach(function(i){
  i.src=i.getAttribute('data-live')+'?t='+Date.now();});},2000);
"""


@dataclass
class ConsoleOps:
    """What the pages do, through the same code as the API (and the CLI): built by
    :func:`vidnexus.roles.console.build_api`."""

    role_of: Callable[..., str | None]
    """(token, client address, login=False) → ``"read"``, ``"admin"`` or None (counts toward the
    back-off; only a sign-in clears it); raises ``PageError`` while the address waits."""
    registry: Callable[[], Any]
    add_stream: Callable[[dict[str, Any]], dict[str, Any]]
    """A form's fields → the stream's document; raises ``PageError`` naming the field."""
    sql: Callable[[str], tuple[int, dict[str, Any]]]
    apps: Callable[[], list[dict[str, Any]]]
    app_queries: Callable[[str], dict[str, str] | None]
    sessions: Callable[[], dict[str, Any] | None]
    drops: Callable[[float], dict[str, Any]]


class PageError(VidnexusError):
    """A change a page asked for was refused; the message names the field."""


def _page(title: str, body: str, role: str | None, active: str = "", *, live: bool = False) -> str:
    nav = "".join(f'<a href="{href}" class="{"on" if key == active else ""}">{name}</a>'
                  for key, href, name in (("streams", "/streams", "Streams"), ("sessions", "/sessions", "Sessions"),
                                          ("apps", "/apps", "Apps"), ("sql", "/sql", "SQL")))
    who = (f'<span class="who">{html.escape(role)} token · <form class="inline" method="post" action="/logout">'
           f'<button>sign out</button></form></span>') if role else ""
    script = f"<script>{_REFRESH_JS}</script>" if live else ""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)} · vidnexus</title>"
            f"<style>{_CSS}</style></head><body><header><b>vidnexus</b>{nav}{who}</header>"
            f"<main><h2>{html.escape(title)}</h2>{body}</main>{script}</body></html>")


def _table(columns: Sequence[str], rows: Sequence[Sequence[Any]], limit: int = 200) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in r) + "</tr>" for r in rows[:limit])
    more = f"<small>{len(rows) - limit} more rows not shown</small>" if len(rows) > limit else ""
    return f"<table><tr>{head}</tr>{body}</table>{more}"


def _cell(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _ago(ts: float | None, now: float) -> str:
    if not ts:
        return "never"
    s = max(0.0, now - ts)
    return f"{s:.1f} s ago" if s < 120 else f"{s / 60:.0f} min ago"


def _result(code: int, doc: Mapping[str, Any]) -> str:
    if code != 200:
        return f'<div class="err">{html.escape(str(doc.get("error", doc)))}</div>'
    cols, types, rows = doc.get("columns", []), doc.get("types", []), doc.get("rows", [])
    chart = chart_svg(cols, types, rows) or ""
    note = " (truncated)" if doc.get("truncated") else ""
    return f"{chart}{_table(cols, rows)}<small>{len(rows)} rows{note}, {doc.get('elapsed_ms', '?')} ms</small>"


def mount_pages(api: FastAPI, ops: ConsoleOps, *, tap: FrameTap | None = None) -> None:
    """Add the console's pages to ``api`` (a FastAPI app; the pages are not in its OpenAPI document)."""
    def form(raw: bytes) -> dict[str, str]:
        return {k: v[-1] for k, v in parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True).items()}

    def client(request: Request) -> str:
        return request.client.host if request.client else "?"

    class _Blocked(Exception):
        pass

    def who(request: Request) -> str | None:
        token = request.cookies.get(COOKIE)
        if not token:
            return None
        try:
            return ops.role_of(token, client(request))
        except PageError as e:
            raise _Blocked(str(e)) from None

    @api.exception_handler(_Blocked)
    def blocked(request: Request, exc: _Blocked) -> Response:
        return HTMLResponse(_page("Wait", f'<div class="err">{html.escape(str(exc))}</div>', None), status_code=429)

    def login_first() -> Response:
        r = RedirectResponse("/login", status_code=303)
        r.delete_cookie(COOKIE, path="/")  # a stale cookie (the tokens changed) is not sent again
        return r

    def cross_site(request: Request) -> bool:
        """A change sent by a page of another origin (CSRF): the browser says so in Sec-Fetch-Site,
        else the Origin header names another host or port."""
        site = request.headers.get("sec-fetch-site")
        if site is not None:
            return site not in ("same-origin", "none")
        origin = request.headers.get("origin")
        return origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}"

    def forbidden_origin() -> HTMLResponse:
        return HTMLResponse(_page("Not allowed", '<div class="err">a change from another site\'s page is refused</div>',
                                  None), status_code=403)

    def refused(role: str | None, what: str) -> HTMLResponse:
        return HTMLResponse(_page("Not allowed", f'<div class="err">{html.escape(what)} needs the admin token; '
                                                 f'you signed in with the read token.</div>', role), status_code=403)


    @api.get("/", include_in_schema=False)
    def index() -> Response:
        return RedirectResponse("/streams", status_code=303)

    @api.get("/login", include_in_schema=False)
    def login_page(request: Request, error: str = "") -> HTMLResponse:
        msg = f'<div class="err">{html.escape(error)}</div>' if error else ""
        body = (f"{msg}<form method='post' action='/login'><p>Token (read or admin; "
                f"<code>console-token</code> / <code>console-admin-token</code> in the data directory, or "
                f"VNX_CONSOLE_TOKEN / VNX_CONSOLE_ADMIN_TOKEN):</p>"
                f"<input type='password' name='token' size='48' autofocus> <button>Sign in</button></form>")
        return HTMLResponse(_page("Sign in", body, None))

    @api.post("/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        if cross_site(request):
            return forbidden_origin()
        token = form(await request.body()).get("token", "").strip()
        try:
            role = ops.role_of(token, client(request), login=True)
        except PageError as e:  # too many wrong tokens from this address
            return HTMLResponse(_page("Sign in", f'<div class="err">{html.escape(str(e))}</div>', None), status_code=429)
        if role is None:
            return RedirectResponse("/login?error=" + quote("wrong token"), status_code=303)
        r = RedirectResponse("/streams", status_code=303)
        r.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        return r

    @api.post("/logout", include_in_schema=False)
    def logout(request: Request) -> Response:
        if cross_site(request):
            return forbidden_origin()
        r = RedirectResponse("/login", status_code=303)
        r.delete_cookie(COOKIE, path="/")
        return r

    # -- streams ------------------------------------------------------------------------------
    def streams_page(role: str, message: str = "", error: str = "", values: Mapping[str, str] | None = None,
                     code: int = 200) -> HTMLResponse:
        reg = ops.registry()
        now = wall()
        cards = []
        for r in reg.list():
            s = r.spec
            st = reg.status(s.name) or {}
            updated = st["updated"].timestamp() if hasattr(st.get("updated"), "timestamp") else None
            span = float(st.get("last_pts") or 0.0)  # seconds of video so far: rates in the video's time
            fps = (f"sampled {st.get('sampled', 0) / span:.1f} fps of {st.get('decoded', 0) / span:.1f} decoded"
                   if span > 0 else "no frame yet")
            last = tap.last_frame_wall(s.name) if tap is not None else None
            since = f"last frame {_ago(last, now)}" if tap is not None else f"status {_ago(updated, now)}"
            img = (f'<img alt="latest frame of {html.escape(s.name)}" data-live="/streams/{quote(s.name)}/thumbnail.jpg" '
                   f'src="/streams/{quote(s.name)}/thumbnail.jpg">' if tap is not None else "")
            actions = ""
            if role == "admin":
                verb = "resume" if r.state == "paused" else "pause"
                actions = (f'<form class="inline" method="post" action="/streams/{quote(s.name)}/{verb}">'
                           f'<button name="do" value="{verb}">{verb}</button></form> '
                           f'<form class="inline" method="post" action="/streams/{quote(s.name)}/remove">'
                           f'<button name="do" value="remove">remove</button></form>')
            cards.append(
                f'<div class="card" data-stream="{html.escape(s.name)}"><h3>{html.escape(s.name)} '
                f'<small class="state-{html.escape(r.state)}">{html.escape(r.state)}</small></h3>{img}'
                f'<p><small>{html.escape(", ".join(s.apps) or "no app")}{" · backfill" if s.backfill else ""}'
                f' · {html.escape(st.get("state", "no status"))}'
                f'{" — " + html.escape(st.get("reason") or "") if st.get("reason") else ""}<br>{fps}<br>'
                f'frames published {st.get("published", 0)} · <span class="since">{since}</span>'
                f'{" · problem: " + html.escape(r.problem) if r.problem else ""}</small></p>{actions}</div>')
        v = dict(values or {})
        add = ""
        if role == "admin":
            apps = "".join(f'<option {"selected" if v.get("app") == a["name"] else ""}>{html.escape(a["name"])}</option>'
                           for a in ops.apps())
            val = {k: html.escape(v.get(k, "")) for k in ("name", "url", "fps", "rate")}
            modes = "".join(f'<option {"selected" if v.get("mode") == m else ""} value="{m}" title="{tip}">{m}</option>'
                            for m, tip in (("live", "a camera: its frames keep the app's SLO"),
                                           ("backfill", "stored video re-analysed in the live sessions' slack "
                                                        "(no deadline; read at max speed unless rate says)")))
            add = ('<h3>Add a stream</h3><form method="post" action="/streams" id="add">'
                   f'name <input name="name" value="{val["name"]}" size="14"> '
                   f'url <input name="url" value="{val["url"]}" size="40"> '
                   f'app <select name="app">{apps}</select> '
                   f'fps <input name="fps" value="{val["fps"]}" size="4"> '
                   f'rate <input name="rate" value="{val["rate"]}" size="6" placeholder="realtime"> '
                   f'mode <select name="mode">{modes}</select> '
                   '<button>Add</button></form>')
        body = ((f'<div class="ok">{html.escape(message)}</div>' if message else "")
                + (f'<div class="err">{html.escape(error)}</div>' if error else "")
                + (f'<div class="cards">{"".join(cards)}</div>' if cards else "<p>No streams registered.</p>") + add)
        return HTMLResponse(_page("Streams", body, role, "streams", live=True), status_code=code)

    @api.get("/streams", include_in_schema=False)
    def streams(request: Request, done: str = "") -> Response:
        role = who(request)
        return streams_page(role, message=done) if role else login_first()

    def done(message: str) -> Response:
        """After a change, back to the streams page by GET (a reload does not send the form again)."""
        return RedirectResponse("/streams?done=" + quote(message), status_code=303)

    @api.post("/streams", include_in_schema=False)
    async def add_stream(request: Request) -> Response:
        role = who(request)
        if role is None:
            return login_first()
        if cross_site(request):
            return forbidden_origin()
        if role != "admin":
            return refused(role, "Adding a stream")
        values = form(await request.body())
        try:  # probing a source takes seconds: off the event loop, which serves every other request
            doc = await run_in_threadpool(ops.add_stream, values)
        except PageError as e:
            return streams_page(role, error=str(e), values=values, code=422)
        return done(f"stream {doc['name']} added")

    @api.post("/streams/{name}/{verb}", include_in_schema=False)
    def change_stream(name: str, verb: str, request: Request) -> Response:
        role = who(request)
        if role is None:
            return login_first()
        if cross_site(request):
            return forbidden_origin()
        if role != "admin":
            return refused(role, f"To {verb} a stream")
        how = {"pause": ops.registry().pause, "resume": ops.registry().resume, "remove": ops.registry().remove}.get(verb)
        if how is None:
            return HTMLResponse(_page("Not found", f"<p>no action {html.escape(verb)}</p>", role), status_code=404)
        try:
            how(name)
        except VidnexusError as e:
            return streams_page(role, error=str(e), code=409)
        return done(f"stream {name} {dict(pause='paused', resume='resumed', remove='removed')[verb]}")

    @api.get("/streams/{name}/thumbnail.jpg", include_in_schema=False)
    def thumbnail(name: str, request: Request) -> Response:
        if who(request) is None:
            return Response(status_code=401)
        jpeg = tap.thumbnail(name) if tap is not None else None
        if jpeg is None:
            return Response(status_code=404, headers={"Cache-Control": "no-store"})
        return Response(jpeg, media_type="image/jpeg", headers={"Cache-Control": "no-store"})

    # -- sessions -----------------------------------------------------------------------------
    @api.get("/sessions", include_in_schema=False)
    def sessions(request: Request) -> Response:
        role = who(request)
        if role is None:
            return login_first()
        doc = ops.sessions()
        if doc is None:
            body = "<p>This console reads no control plane (run it with VNX_BUS=kafka, or inside " \
                   "<code>vidnexus run --console-port</code>).</p>"
        elif not doc["executors"]:
            body = "<p>No executor has reported yet (they report every few seconds).</p>"
        else:
            parts = [f"<p>Plan epoch {doc['epoch']}, {doc['devices']} devices planned.</p>" if doc["epoch"] is not None
                     else "<p>No plan published yet.</p>"]
            cols = ["session", "model", "SLO ms", "batch (planned)", "rate/s", "within SLO", "p50 ms", "p99 ms",
                    "device busy", "drops"]
            for ex in doc["executors"]:
                rows = [[x["session"], x["model"], x["slo_ms"], f"{x['batch']} ({x['planned_batch']})", x["rate"],
                         f"{100 * x['within_slo']:.1f}%" if x["within_slo"] is not None else None,
                         x["latency_p50_ms"], x["latency_p99_ms"], f"{100 * x['device_busy']:.0f}%",
                         ", ".join(f"{k} {n}" for k, n in sorted(x["drops"].items())) or "none"]
                        for x in ex["sessions"]]
                parts.append(f"<h3>executor {html.escape(ex['executor'])} <small>{html.escape(str(ex['device']))}, "
                             f"report {ex['age_s']} s old</small></h3>{_table(cols, rows)}")
            body = "".join(parts)
        drops = ops.drops(10.0)["apps"]
        if drops:
            rows = [[app, ", ".join(f"{k} {n}" for k, n in sorted(d["frames"].items())),
                     ", ".join(f"{k} {n}" for k, n in sorted(d["drops"].items())) or "none"]
                    for app, d in sorted(drops.items())]
            body += "<h3>Frames in the last 10 minutes</h3>" + _table(["app", "frames by outcome", "drops by reason"], rows)
        return HTMLResponse(_page("Sessions and plan", body, role, "sessions"))

    # -- apps ---------------------------------------------------------------------------------
    @api.get("/apps", include_in_schema=False)
    def apps(request: Request) -> Response:
        role = who(request)
        if role is None:
            return login_first()
        items = "".join(f'<li><a href="/apps/{quote(a["name"])}">{html.escape(a["name"])}</a> — '
                        f'{html.escape(a["description"])}</li>' for a in ops.apps())
        return HTMLResponse(_page("Apps", f"<ul>{items}</ul>", role, "apps"))

    @api.get("/apps/{name}", include_in_schema=False)
    def app_page(name: str, request: Request) -> Response:
        role = who(request)
        if role is None:
            return login_first()
        queries = ops.app_queries(name)
        if queries is None:
            return HTMLResponse(_page("Unknown app", f"<p>no app {html.escape(name)}</p>", role, "apps"), status_code=404)
        parts = []
        for title, q in queries.items():
            code, doc = ops.sql(q)
            parts.append(f'<section data-query="{html.escape(title)}"><h3>{html.escape(title)}</h3>{_result(code, doc)}'
                         f"<details><summary>SQL</summary><pre>{html.escape(q.strip())}</pre></details></section>")
        return HTMLResponse(_page(f"App {name}", "".join(parts), role, "apps"))

    # -- SQL ----------------------------------------------------------------------------------
    def sql_page(role: str, query: str, result: str = "") -> HTMLResponse:
        body = (f"<form method='post' action='/sql'><textarea name='query' rows='6'>{html.escape(query)}</textarea>"
                f"<br><button>Run</button> <small>one read-only statement</small></form>{result}")
        return HTMLResponse(_page("SQL", body, role, "sql"))

    @api.get("/sql", include_in_schema=False)
    def sql_form(request: Request) -> Response:
        role = who(request)
        if role is None:
            return login_first()
        return sql_page(role, "SELECT app, status, count() AS frames FROM vnx_frames GROUP BY app, status ORDER BY app")

    @api.post("/sql", include_in_schema=False)
    async def sql_run(request: Request) -> Response:
        role = who(request)
        if role is None:
            return login_first()
        query = form(await request.body()).get("query", "")
        code, doc = await run_in_threadpool(ops.sql, query)  # up to its time limit: off the event loop
        return sql_page(role, query, _result(code, doc))
