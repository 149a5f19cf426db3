"""The built-in traffic app with a 30-second SLO (see game_patient.py for why)."""

import copy

from vidnexus.apps.traffic import app as traffic_app

app = copy.copy(traffic_app)
app.slo_ms = 30_000.0
