"""Run a built-in app distributed over the real broker and ClickHouse server: one executor, one
worker and one sink process, frames published by the test at the sources' real pace (so the
app's own SLO applies), and every frame waited for in ``vnx_frames``.

The deployment itself is :mod:`vidnexus.benchmarks.app_deployment` (``vidnexus bench soak`` runs
it too); here a role that does not start or frames that never arrive fail the test."""

from __future__ import annotations

import pytest

from vidnexus.benchmarks import app_deployment
from vidnexus.benchmarks.app_deployment import Deployment, feed, render, teardown
from vidnexus.errors import VidnexusError

__all__ = ["Deployment", "deploy", "feed", "render", "teardown", "wait_frames"]


def deploy(kafka_bootstrap: str, clickhouse_url: str, app: str, sessions: list[str]) -> Deployment:
    try:
        return app_deployment.deploy(kafka_bootstrap, clickhouse_url, app, sessions)
    except VidnexusError as e:
        pytest.fail(str(e))


def wait_frames(d: Deployment, app: str, where: str, want: int, timeout_s: float) -> None:
    try:
        app_deployment.wait_frames(d, app, where, want, timeout_s)
    except VidnexusError as e:
        pytest.fail(str(e))
