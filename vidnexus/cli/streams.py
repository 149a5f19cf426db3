"""``vidnexus streams …``: the stream registry."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

import typer
from rich.table import Table

from vidnexus.cli.common import console, finite, settings
from vidnexus.errors import VidnexusError

streams_app = typer.Typer(help="Camera streams: add, list, show, pause, resume, remove, tags (lines and zones).",
                          no_args_is_help=True)


@contextlib.contextmanager
def registry() -> Iterator[Any]:
    """The stream registry on the configured store, closed after use."""
    from vidnexus.connectors.factory import open_store
    from vidnexus.streams.registry import StreamRegistry

    store = open_store(settings())
    try:
        yield StreamRegistry(store)
    finally:
        store.close()


def parse_tags(items: list[str]) -> dict[str, str]:
    """``--tag k=v`` options as a dict; a ``line.NAME`` tag (a counting line, docs/apps.md) must
    be x1,y1,x2,y2."""
    from vidnexus.operators.zones import parse_geometry

    tags = {}
    for t in items:
        k, sep, v = t.partition("=")
        if not sep or not k:
            raise VidnexusError(f"--tag {t!r}: expected k=v")
        tags[k] = v
    try:
        parse_geometry(tags)
    except ValueError as e:
        raise VidnexusError(f"--tag: {e}") from None
    return tags


@streams_app.command("add")
def streams_add(
    name: str = typer.Argument(..., help="Stream name (letters, digits, '-', '_', '.')."),
    url: str = typer.Argument(..., help="File path, rtsp://, http(s):// (incl. HLS) or synthetic://hud?…"),
    fps: Optional[float] = typer.Option(None, callback=finite, min=0.001, max=1000.0,
                                        help="Sample this many frames per second of video (default 1 when "
                                             "neither --every-n nor --keyframes is given)."),
    every_n: Optional[int] = typer.Option(None, min=1, max=2**32 - 1, help="Sample every n-th frame instead."),
    keyframes: bool = typer.Option(False, help="Decode and sample keyframes only (with --every-n: every n-th)."),
    app_: list[str] = typer.Option([], "--app", help="App this stream feeds: a built-in name or "
                                   "package.module:attribute of your own App (repeatable; each is loaded to check it)."),
    tag: list[str] = typer.Option([], help="k=v tag (repeatable)."),
    quality: int = typer.Option(85, min=1, max=100, help="JPEG quality of published frames."),
    max_side: Optional[int] = typer.Option(None, min=16, max=16384,
                                           help="Downscale so the longer side is at most this."),
    mode: str = typer.Option("live", help="live (frames carry the app's SLO) or backfill (delay-tolerant "
                             "re-processing of stored video: frames go to the backfill topic and run, with no "
                             "deadline, in the slack the live sessions leave; needs a backfill worker: `vidnexus "
                             "worker APP --backfill`, or `vidnexus run`, which starts one)."),
    rate: Optional[str] = typer.Option(None, help="How fast a file is read: realtime (at its own frame rate, as a "
                                       "camera sends it), max (as fast as it decodes) or a factor of real time "
                                       "(2 = twice as fast); default realtime, max with --mode backfill. Live "
                                       "sources come at their own pace."),
    until: Optional[float] = typer.Option(None, callback=finite, min=0.001,
                                          help="Stop a file after this many seconds of video (its first part)."),
    skip_corrupt: bool = typer.Option(True, help="Skip packets the decoder rejects and count them (the stream "
                                      "fails above 10% corrupt); --no-skip-corrupt ends it at the first."),
    probe: bool = typer.Option(True, "--probe/--no-probe", help="Probe the URL (reachable, codec, resolution, "
                               "frame rate) before accepting it; --no-probe registers it unchecked."),
    timeout: float = typer.Option(10.0, callback=finite, min=0.1, max=3600.0, help="Probe timeout (s)."),
) -> None:
    """Register a stream: the URL is probed (codec, resolution, frame rate) before it is accepted."""
    from vidnexus.streams.ingest import StreamSpec
    from vidnexus.streams.spec import parse_rate

    if mode not in ("live", "backfill"):
        raise VidnexusError(f"--mode {mode!r}: use live or backfill")
    realtime, speed = parse_rate(rate or ("max" if mode == "backfill" else "realtime"))
    tags = parse_tags(tag)
    from vidnexus.apps import load_app

    apps = tuple(dict.fromkeys(load_app(a).name for a in app_))
    spec = StreamSpec(name, url, fps=fps, every_n=every_n, keyframes_only=keyframes, apps=apps, tags=tags,
                      jpeg_quality=quality, max_side=max_side, realtime=realtime, speed=speed, skip_corrupt=skip_corrupt,
                      until_s=until, backfill=mode == "backfill")
    with registry() as reg:
        r = reg.add(spec, check=probe, timeout_s=timeout)
    p = r.probe
    extra = f" ({p.get('kind', '?')}, {p['codec']} {p['width']}x{p['height']} @ {p['fps']:.2f} fps)" if p else ""
    console.print(f"added stream {name}{extra}")


@streams_app.command("list")
def streams_list(all_: bool = typer.Option(False, "--all", help="Include removed streams.")) -> None:
    """Registered streams."""
    t = Table("name", "state", "mode", "url", "sampling", "apps", "tags", "problem")
    with registry() as reg:
        rows = reg.list(include_removed=all_)
    for r in rows:
        s = r.spec
        t.add_row(s.name, r.state, "backfill" if s.backfill else "live", s.url, _sampling(s), ",".join(s.apps),
                  ",".join(f"{k}={v}" for k, v in s.tags.items()), r.problem)
    console.print(t)


def _sampling(s: Any) -> str:
    """How a stream is sampled, in words (works for rows that no longer validate)."""
    every = f"every {s.every_n}" if s.every_n else ""
    if s.keyframes_only:
        return f"keyframes{', ' + every if every else ''}"
    return every or (f"{s.fps:g} fps" if isinstance(s.fps, (int, float)) else str(s.fps))


@streams_app.command("show")
def streams_show(name: str = typer.Argument(...)) -> None:
    """One stream: registration, probe and the last status reported by ingest."""
    from vidnexus.streams.spec import rate_text

    with registry() as reg:
        r = reg.get(name)
        st = reg.status(name)
    console.print(f"name: {r.spec.name}\nstate: {r.state}" + (f" ({r.problem})" if r.problem else "")
                  + f"\nurl: {r.spec.url}\nsampling: {_sampling(r.spec)}\nrate: {rate_text(r.spec)}"
                  + f"\napps: {', '.join(r.spec.apps) or 'none'}"
                  + f"\ntags: {', '.join(f'{k}={v}' for k, v in sorted(r.spec.tags.items())) or 'none'}"
                  + f"\nprobe: {r.probe}", markup=False)
    if st:
        keys = ("state", "reason", "decoded", "sampled", "published", "rejected", "undelivered", "stale", "corrupt",
                "errors",
                "reconnects", "last_pts", "max_gap_s", "worker", "updated")
        console.print("ingest: " + ", ".join(f"{k}={st[k]}" for k in keys if st.get(k) not in ("", None)), markup=False)
    else:
        console.print("ingest: no status reported yet")


@streams_app.command("pause")
def streams_pause(name: str) -> None:
    """Stop ingesting a stream (running ingest workers pick this up)."""
    with registry() as reg:
        reg.pause(name)
    console.print(f"paused {name}")


@streams_app.command("resume")
def streams_resume(name: str) -> None:
    """Resume a paused stream."""
    with registry() as reg:
        reg.resume(name)
    console.print(f"resumed {name}")


@streams_app.command("remove")
def streams_remove(name: str) -> None:
    """Remove a stream."""
    with registry() as reg:
        reg.remove(name)
    console.print(f"removed {name}")


@streams_app.command("tags")
def streams_tags(
    name: str = typer.Argument(...),
    tag: list[str] = typer.Option([], help="k=v to set, repeatable: a counting line line.NAME=x1,y1,x2,y2 or a "
                                  "zone zone.NAME=x1,y1,x2,y2,x3,y3[,…] in the frame's pixels (docs/zones.md)."),
    remove: list[str] = typer.Option([], help="A tag's key to remove, repeatable."),
) -> None:
    """Change a stream's tags (its lines and zones) without re-adding it: a running ingest picks the
    change up and continues the stream's frame numbers; the app counts with the new lines from the
    next frame. Prints the tags it has now."""
    with registry() as reg:
        r = reg.get(name)
        tags = {k: v for k, v in r.spec.tags.items() if k not in set(remove)}
        unknown = sorted(set(remove) - set(r.spec.tags))
        if unknown:
            raise VidnexusError(f"stream {name} has no tag {', '.join(unknown)}; its tags: "
                                f"{', '.join(sorted(r.spec.tags)) or 'none'}")
        tags.update(parse_tags(tag))
        parse_tags([f"{k}={v}" for k, v in tags.items()])  # the whole set, as the app will read it
        r = reg.set_tags(name, tags)
    console.print(f"{name}: " + (", ".join(f"{k}={v}" for k, v in sorted(r.spec.tags.items())) or "no tags"))

