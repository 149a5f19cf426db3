#!/usr/bin/env bash
# `make demo`: bootstrap the virtualenv, then run the embedded demo (in-process bus + chdb).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(bash scripts/bootstrap.sh)
exec "$venv/bin/vidnexus" demo "$@"
