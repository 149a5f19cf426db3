#!/usr/bin/env bash
# `make test`: bootstrap the virtualenv, type-check the package (mypy strict), install and start the
# real Kafka broker and ClickHouse server on loopback, run the unit, simulator and integration suites,
# stop the services.
# Exits non-zero on any failure (including a service that cannot be installed or started).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
venv=$(bash scripts/bootstrap.sh)
echo "test: virtualenv $venv ready after $(( $(date +%s) - start )) s"
# Type check first (mypy strict on the package, [tool.mypy] in pyproject.toml): fails fast, before any service starts.
"$venv/bin/python" -m mypy vidnexus || { echo "test: mypy found type errors in vidnexus (see above)" >&2; exit 1; }
# The peers of `vidnexus bench peers` (Triton via PyTriton, Ray Serve) in their own virtualenv.
peers_python=$(bash scripts/peers-venv.sh)
export VNX_PEERS_PYTHON=$peers_python
echo "test: peers virtualenv ready after $(( $(date +%s) - start )) s"

# Test-only system packages: GStreamer's RTSP server for the live-ingest test (run by Debian's python3).
if ! /usr/bin/python3 -c 'import gi; gi.require_version("GstRtspServer", "1.0"); from gi.repository import GstRtspServer' 2>/dev/null; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo -n"
  pkgs="python3-gi gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad gstreamer1.0-rtsp"
  echo "test: installing $pkgs with apt-get"
  if ! apt-cache policy gir1.2-gst-rtsp-server-1.0 | grep -q 'Candidate: [0-9]'; then
    $sudo apt-get update -q >/dev/null || { echo "test: apt-get update failed" >&2; exit 1; }
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $pkgs >/dev/null \
    || { echo "test: apt-get could not install $pkgs (needed by tests/integration/test_rtsp_live.py)" >&2; exit 1; }
fi

# ffmpeg: the baseline of `vidnexus bench ingest`.
if ! command -v ffmpeg >/dev/null; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo -n"
  echo "test: installing ffmpeg with apt-get"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ffmpeg >/dev/null \
    || { echo "test: apt-get could not install ffmpeg (needed by vidnexus bench ingest)" >&2; exit 1; }
fi

# Debian's chromium and its driver: the web console's browser test (tests/integration/test_console_browser.py).
if ! command -v chromedriver >/dev/null || ! command -v chromium >/dev/null; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo -n"
  echo "test: installing chromium and chromium-driver with apt-get"
  if ! apt-cache policy chromium-driver | grep -q 'Candidate: [0-9]'; then
    $sudo apt-get update -q >/dev/null || { echo "test: apt-get update failed" >&2; exit 1; }
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null \
    || { echo "test: apt-get could not install chromium chromium-driver (needed by tests/integration/test_console_browser.py)" >&2; exit 1; }
fi

export VNX_WORK_DIR=${VNX_WORK_DIR:-$PWD/.vnx/test}
export VNX_DATA_DIR=${VNX_DATA_DIR:-$VNX_WORK_DIR/data}
export VNX_KAFKA_BOOTSTRAP=${VNX_KAFKA_BOOTSTRAP:-127.0.0.1:19092}
export VNX_CLICKHOUSE_URL=${VNX_CLICKHOUSE_URL:-clickhouse://default:@127.0.0.1:19000/default}
export VNX_REQUIRE_SERVICES=1   # integration tests fail (never skip) when a service is missing

# The models the project trains itself (traffic's car colours, dance's pose regressor, game's digit
# reader and glyph models: about 4 minutes on 2 cores) are seeded from a cache keyed by the hash of
# everything their training reads: the locks (torch, OpenCV), the code that renders their data and
# trains them, the hand labels and the real footage. Any change there trains afresh (and stores
# the result under the new key when the run ends), as a changed lock builds a new virtualenv.
model_key=$( (sha256sum requirements.lock requirements-files.lock tests/data/hand_counts.json \
                ../shared/data/real/*.mp4 2>/dev/null || true;
              git ls-files -z vidnexus/apps vidnexus/training vidnexus/streams vidnexus/operators vidnexus/contracts \
                vidnexus/clock.py vidnexus/errors.py vidnexus/config.py vidnexus/gpu_executor/catalog.py \
                vidnexus/gpu_executor/preprocess.py vidnexus/gpu_executor/profiler.py vidnexus/gpu_executor/zoo.py \
                vidnexus/gpu_executor/prefix.py | xargs -0 sha256sum) | sha256sum | cut -c1-16)
model_cache=${VNX_CACHE_DIR:-$HOME/.cache/vidnexus}/models-$model_key
mkdir -p "$VNX_DATA_DIR/models"
if [ -d "$model_cache" ]; then
  cp -pn "$model_cache"/* "$VNX_DATA_DIR/models/" 2>/dev/null || true
  echo "test: trained models from $model_cache"
fi
save_models() {  # what this run trained, for the next run with the same key (the last 3 keys kept)
  [ -n "$(ls -A "$VNX_DATA_DIR/models" 2>/dev/null)" ] || return 0
  mkdir -p "$model_cache" && cp -pn "$VNX_DATA_DIR/models"/* "$model_cache/" 2>/dev/null
  ls -dt "${model_cache%-*}"-???????????????? 2>/dev/null | tail -n +4 | xargs -r rm -rf
}

cleanup() { "$venv/bin/vidnexus" services down || true; save_models || true; }
trap cleanup EXIT
"$venv/bin/vidnexus" services up
echo "test: services up after $(( $(date +%s) - start )) s"

rc=0
"$venv/bin/python" -m pytest tests -q -p no:cacheprovider --durations=30 "$@" || rc=$?
echo "test: finished in $(( $(date +%s) - start )) s (exit $rc)"
exit $rc
