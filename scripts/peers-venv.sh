#!/usr/bin/env bash
# Create (or reuse) the virtualenv with the peers of `vidnexus bench peers`: NVIDIA Triton through
# PyTriton, and Ray Serve, with torch. Keyed by the hash of requirements-peers.lock; prints the
# path of its python. Made from Debian's /usr/bin/python3 (override with PEERS_PYTHON=...): PyTriton's
# bundled Python backend does not load from a pyenv-built interpreter.
# Equivalent for a user with a suitable Python: pip install -e '.[peers]'.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${VNX_CACHE_DIR:-$HOME/.cache/vidnexus}
WHEELS="$CACHE/wheelhouse"
PYTHON=${PEERS_PYTHON:-/usr/bin/python3}
[ -x "$PYTHON" ] || { echo "peers-venv: $PYTHON not found (set PEERS_PYTHON to a CPython 3.11 with venv)" >&2; exit 1; }
"$PYTHON" -c 'import venv, ensurepip' 2>/dev/null || {
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo -n"
  echo "peers-venv: installing python3-venv with apt-get" >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv >/dev/null \
    || { echo "peers-venv: apt-get could not install python3-venv" >&2; exit 1; }
}
hash=$( (sha256sum requirements-peers.lock; "$PYTHON" --version) | sha256sum | cut -c1-16)
venv="$CACHE/peers-venv-$hash"
if [ ! -f "$venv/.complete" ]; then
  echo "peers-venv: creating $venv" >&2
  rm -rf "$venv"
  mkdir -p "$WHEELS"
  "$PYTHON" -m venv "$venv"
  "$venv/bin/python" -m pip download -q -d "$WHEELS" -r requirements-peers.lock >&2
  "$venv/bin/python" -m pip install -q --no-index --find-links "$WHEELS" -r requirements-peers.lock >&2
  "$venv/bin/python" -c 'import pytriton, ray.serve, torch' >&2
  touch "$venv/.complete"
fi
echo "$venv/bin/python"
