"""The HUD chain with a 10-minute SLO, so that no frame is dropped and the runtimes must agree row
for row (the built-in app's 200 ms SLO would drop frames queued before a worker starts)."""

from vidnexus.apps.hud import cell_inputs, crop_cells, reader as hud_reader, to_row
from vidnexus.operators.chain import App, Stream

app = App("hud_patient", slo_ms=600_000)
reader = app.model(hud_reader.name, decode=hud_reader.decode)
reads = app.table("hud_patient_reads", {
    "pts": "Float64", "score_read": "Int32", "kills_read": "Int32", "score_truth": "Int32",
    "kills_truth": "Int32", "digits": "Array(UInt8)", "latency_ms": "Float32", "ingest_ts": "Float64",
})


@app.chain
def pipeline(frames: Stream) -> Stream:
    return frames.map(crop_cells).infer(reader, input=cell_inputs, many=True).map(to_row).sink(reads)
