#!/usr/bin/env bash
# Create (or reuse) the project virtualenv, keyed by the hash of requirements.lock,
# install vidnexus into it in editable mode, and point ./.venv at it. Prints the venv path.
#
# Cache: ${VNX_CACHE_DIR:-~/.cache/vidnexus} holds the venvs and a wheelhouse of every downloaded
# wheel, so a second run (or a fresh clone on the same machine) reuses the venv, and a changed lock
# downloads only what is new.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
CACHE=${VNX_CACHE_DIR:-$HOME/.cache/vidnexus}
WHEELS="$CACHE/wheelhouse"
mkdir -p "$CACHE" "$WHEELS"

if ! command -v "$PYTHON" >/dev/null; then
  echo "bootstrap: $PYTHON not found; vidnexus needs Python >= 3.11" >&2; exit 1
fi
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || {
  echo "bootstrap: $($PYTHON --version) is too old; vidnexus needs Python >= 3.11" >&2; exit 1; }

hash=$(sha256sum requirements.lock | cut -c1-16)
pyver=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
venv="$CACHE/venv-py$pyver-$hash"

if [ ! -f "$venv/.complete" ]; then
  echo "bootstrap: creating $venv (first run downloads PyTorch: a few GB, several minutes)" >&2
  rm -rf "$venv"
  "$PYTHON" -m venv "$venv"
  # Files already in the wheelhouse are not downloaded again.
  "$venv/bin/python" -m pip download -q -d "$WHEELS" -r requirements.lock >&2
  "$venv/bin/python" -m pip install -q --no-index --find-links "$WHEELS" -r requirements.lock >&2
  touch "$venv/.complete"
fi
# Packages kept for the files they ship (model weights), without their dependencies; a marker per
# hash of requirements-files.lock, so a change there does not rebuild the venv.
fhash=$(sha256sum requirements-files.lock | cut -c1-16)
if [ ! -f "$venv/.files-$fhash" ]; then
  "$venv/bin/python" -m pip download -q --no-deps -d "$WHEELS" -r requirements-files.lock >&2
  "$venv/bin/python" -m pip install -q --no-deps --no-index --find-links "$WHEELS" -r requirements-files.lock >&2
  touch "$venv/.files-$fhash"
fi
# Editable install of this checkout (no dependencies: those come from the lock above).
log="$CACHE/editable-install.log"
"$venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e . >"$log" 2>&1 || {
  cat "$log" >&2; echo "bootstrap: installing this checkout failed" >&2; exit 1; }
ln -sfn "$venv" .venv
echo "$venv"
