#!/usr/bin/env bash
# The traffic app's tracker against supervision's ByteTrack and LineZone (scripts/compare_trackers.py).
# supervision is not a dependency of vidnexus: a side virtualenv gets supervision 0.26.1 (the last
# release with ByteTrack; 0.27+ moved tracking out) and sees the project's virtualenv for the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(bash scripts/bootstrap.sh)
# supervision and what it imports beyond the project's own packages, pinned (no dependency resolution:
# numpy, scipy, opencv, pillow and pyyaml are the project's).
pins="supervision==0.26.1 matplotlib==3.11.2 contourpy==1.3.3 cycler==0.12.1 fonttools==4.68.0 kiwisolver==1.5.1
pyparsing==3.3.3 defusedxml==0.7.1 tqdm==4.70.1 requests==2.34.2 charset-normalizer==3.5.3"
side=${VNX_CACHE_DIR:-$HOME/.cache/vidnexus}/supervision-0.26.1-$(echo "$pins" | sha256sum | cut -c1-8)
if [ ! -f "$side/.done" ]; then
  rm -rf "$side"
  "$venv/bin/python" -m venv "$side"
  # shellcheck disable=SC2086
  "$side/bin/python" -m pip install -q --no-deps $pins >&2
  touch "$side/.done"
fi
site=$("$venv/bin/python" -c "import site; print(site.getsitepackages()[0])")
printf '%s\n%s\n' "$site" "$PWD" > "$("$side/bin/python" -c 'import site; print(site.getsitepackages()[0])')/vnx.pth"
exec "$side/bin/python" scripts/compare_trackers.py "$@"
