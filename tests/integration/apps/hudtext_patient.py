"""The built-in hudtext app with a 30-second SLO: the integration test checks what the distributed
pipeline reads against the values drawn, on a loaded 2-core machine (broker, ClickHouse, executor,
worker and sink beside the test); SLO attainment is measured by the demo and documented."""

import copy

from vidnexus.apps.hudtext import app as hudtext_app

app = copy.copy(hudtext_app)
app.slo_ms = 30_000.0
