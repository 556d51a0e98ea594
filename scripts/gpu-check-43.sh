#!/usr/bin/env bash
# The GPU machine's check for issue 43 (run by the `device` tool from the repo root:
# `bash scripts/gpu-check-43.sh docs/gpu-run/lock-43`; the files land in $OUT, to be
# copied under docs/): the lock made off the machine from its freeze (gpu-record-43.sh)
# is checked against what is installed here, in the system python3 (no venv: users of
# rented GPU servers have system Pythons):
#   - doctor --lock DIR --venv "$(command -v python3)": versions, torch's CUDA build
#     (torch/version.py), the jax-cudaNN-plugin, the nvidia-* wheels, the driver
#     against the lock's floor, the GPU's compute capability; expected: no FAIL;
#   - smoke --host --venv python3 --expect DIR: the harness judges torch and JAX (the
#     lock's expect.json: framework, build, frameworks) with training; expected PASSED.
# Needs python3 3.12 with torch 2.11.0+cu130 and JAX 0.11.2 (jax-cuda13-plugin);
# no network, no uv, docker or cryptography (doctor and smoke --host import none).
# Exit: 0 both PASS, 1 a check failed, 2 bad usage (no lock folder).
set -u
LOCK=${1:-}
if [ -z "$LOCK" ] || [ ! -f "$LOCK/pylock.toml" ] || [ ! -f "$LOCK/expect.json" ]; then
  echo "usage: bash scripts/gpu-check-43.sh LOCK_DIR (a bundle: pylock.toml, expect.json)" >&2
  exit 2
fi
OUT=${OUT:-/tmp/gpu-check-43}
mkdir -p "$OUT"
PY=$(command -v python3)
{ date -u; nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv; "$PY" -V
  "$PY" -c 'import torch, jax; print("torch", torch.__version__, torch.version.cuda); print("jax", jax.__version__)'
} > "$OUT"/env.txt 2>&1
cp "$LOCK"/expect.json "$OUT"/expect.json

status=0
{ echo "\$ envlock doctor --lock $LOCK --venv $PY"
  PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} timeout 300 "$PY" -m envlock doctor --lock "$LOCK" --venv "$PY"
  echo "exit $?"
} > "$OUT"/doctor.txt 2>&1
PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} timeout 300 "$PY" -m envlock doctor --lock "$LOCK" --venv "$PY" --json \
  > "$OUT"/doctor.json 2> "$OUT"/doctor.err
doctor_rc=$?
[ "$doctor_rc" = 0 ] || status=1

{ echo "\$ envlock smoke --host --venv $PY --expect $LOCK --json"
  time PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} timeout 540 "$PY" -m envlock smoke --host --venv "$PY" --expect "$LOCK" \
    --json -o "$OUT"/smoke.json
  echo "exit $?"
} > "$OUT"/smoke.txt 2>&1
grep -q '^exit 0$' "$OUT"/smoke.txt || status=1

OUT="$OUT" "$PY" - > "$OUT"/summary.txt 2>&1 <<'PY'
import json, os
out = os.environ["OUT"]
try:
    d = json.load(open(out + "/doctor.json"))
    rows = d.get("findings") or []
    print("doctor:", d.get("status"), [(f.get("check"), f.get("status")) for f in rows])
except Exception as e:  # noqa: BLE001 - the summary says what it could not read
    print("doctor.json:", type(e).__name__, e)
try:
    s = json.load(open(out + "/smoke.json"))
    print("smoke:", s.get("status"), [(f["framework"], f["status"]) for f in s.get("frameworks", [])])
    for run in s.get("frameworks", []) or [s]:
        for c in run.get("checks", []):
            if c.get("name") in ("build_cuda", "framework_version", "driver_floor") or c.get("status") == "FAIL":
                print("  ", run.get("framework"), c.get("name"), c.get("status"), c.get("reason"))
except Exception as e:  # noqa: BLE001
    print("smoke.json:", type(e).__name__, e)
PY
echo "doctor exit $doctor_rc; overall exit $status" >> "$OUT"/summary.txt
cat "$OUT"/summary.txt
exit "$status"
