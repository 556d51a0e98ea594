#!/usr/bin/env bash
# Run envlock from this checkout, setting up ./.venv on first use.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bash "$root/scripts/ensure-venv.sh"
exec "${ENVLOCK_VENV:-$root/.venv}/bin/envlock" "$@"
