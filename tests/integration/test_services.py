"""`vidnexus services status` sees the running broker and server."""

import subprocess
import sys


def test_services_status_reports_both_running(kafka_bootstrap, clickhouse_url):
    p = subprocess.run([sys.executable, "-m", "vidnexus", "services", "status"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "kafka: running" in p.stdout and "clickhouse: running" in p.stdout
