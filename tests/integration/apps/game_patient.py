"""The built-in game app with a 30-second SLO: the integration test checks what the distributed
pipeline computes against ground truth on a loaded 2-core machine (broker, ClickHouse, executor,
worker and sink beside the test); SLO attainment is measured by the demo and documented."""

import copy

from vidnexus.apps.game import app as game_app

app = copy.copy(game_app)
app.slo_ms = 30_000.0
