"""A loopback RTSP server for the live-ingest test: serves one H.264 MP4 file at rtsp://127.0.0.1:PORT/live.

Runs under Debian's Python with GStreamer's RTSP server (python3-gi, gir1.2-gst-rtsp-server-1.0),
installed by `make test`:  /usr/bin/python3 rtsp_server.py FILE PORT
"""

import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402


def main() -> None:
    path, port = sys.argv[1], sys.argv[2]
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(port)
    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_launch(f"( filesrc location={path} ! qtdemux ! h264parse ! rtph264pay name=pay0 pt=96 config-interval=1 )")
    factory.set_shared(True)
    server.get_mount_points().add_factory("/live", factory)
    if server.attach(None) == 0:
        sys.exit(f"cannot listen on 127.0.0.1:{port}")
    print(f"serving rtsp://127.0.0.1:{port}/live", flush=True)
    GLib.MainLoop().run()


if __name__ == "__main__":
    main()
