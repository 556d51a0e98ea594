#!/usr/bin/env bash
# Make the example report page from a folder of signed reports:
#
#   bash docs/report-page-example/make.sh [REPORTS_DIR] [PUB...]
#
# REPORTS_DIR (default: docs/report-page-example/reports) holds *.intoto.json;
# each PUB is a trusted public key (default: every *.pub.pem beside this
# script). Writes index.html + summary.json here and a screenshot
# (screenshot.png, 1400x900: the width the page is checked at) with headless Chromium when it is installed. Add the H200
# reports to REPORTS_DIR and their signer's public key here, then re-run.
#
# The CPU reports committed here came from (a throwaway key; only its public
# half is kept):
#   envlock keygen -o /tmp/example
#   envlock smoke --host --venv VENV --framework jax --allow-cpu --json -o r.json
#   envlock report sign r.json --key /tmp/example.pem -o reports/NAME.intoto.json
# The H200 reports (torch, jax) are smoke --host runs on the device (docs/gpu-run.md),
# signed here with another throwaway key (example-h200.pub.pem); the TF 2.15.1 CPU
# report is `envlock smoke IMAGE --gpus none --allow-cpu` of an image built here,
# signed with --image; h200-jax-host-TAMPERED has its TFLOP/s doubled after signing.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
envlock=${ENVLOCK:-$root/.venv/bin/envlock}
reports=$(realpath --relative-to="$here" "${1:-$here/reports}")
shift || true
keys=()
for k in "$@"; do keys+=("$(realpath "$k")"); done
cd "$here"  # paths on the page are relative to it
if [ ${#keys[@]} = 0 ]; then
  keys=(*.pub.pem)
fi
args=()
for k in "${keys[@]}"; do args+=(--key "$k"); done
rc=0
"$envlock" report page "$reports"/*.intoto.json "${args[@]}" \
  --title "envlock report page: example" -o "$here" || rc=$?
if command -v chromium >/dev/null 2>&1; then
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --screenshot="$here/screenshot.png" --window-size=1400,900 \
    "file://$here/index.html" >/dev/null 2>&1
fi
exit "$rc"
