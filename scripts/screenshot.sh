#!/usr/bin/env bash
# Renders a self-contained HTML page (report.html, an eval page) to a PNG with headless
# Chromium (Debian's `chromium`; `CORUN_EXTRA_PACKAGES=chromium scripts/install-deps.sh`
# installs it). The page is 1100 px wide; the first 3000 px are kept.
#
#   scripts/screenshot.sh out/run/random-churn/report.html docs/results/run-report.png
#
# Exit codes: 0 written, 2 bad arguments, 3 no browser or the browser wrote nothing.
set -euo pipefail

if (($# != 2)); then
  echo "usage: scripts/screenshot.sh PAGE.html OUT.png" >&2
  exit 2
fi
page=$1
out=$2
if [[ ! -f $page ]]; then
  echo "screenshot: no such page: $page" >&2
  exit 2
fi
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $browser ]]; then
  echo "screenshot: chromium not found (CORUN_EXTRA_PACKAGES=chromium scripts/install-deps.sh)" >&2
  exit 3
fi

# A fresh profile per shot: nothing from an earlier run (cache, crash state) changes the image.
profile=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$profile" "$log"' EXIT
page_abs=$(realpath "$page")
out_abs=$(realpath -m "$out")
mkdir -p "$(dirname "$out_abs")"
rm -f "$out_abs"

# No network, no sync, no updates: the page is self-contained and the shot must not wait on
# anything outside it. `timeout`: a headless browser that hangs must not hang `make eval`.
if ! timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --hide-scrollbars --user-data-dir="$profile" --screenshot="$out_abs" \
  --window-size=1100,3000 "file://$page_abs" >"$log" 2>&1; then
  cat "$log" >&2
  echo "screenshot: $browser failed on $page" >&2
  exit 3
fi
if [[ ! -s $out_abs ]]; then
  cat "$log" >&2
  echo "screenshot: $browser wrote no image for $page" >&2
  exit 3
fi
echo "screenshot: $out"
