"""The built-in dance app with a 30-second SLO (see game_patient.py for why)."""

import copy

from vidnexus.apps.dance import app as dance_app

app = copy.copy(dance_app)
app.slo_ms = 30_000.0
