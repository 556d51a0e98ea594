#!/usr/bin/env bash
# The GPU machine's record for issue 40 (run by the `device` tool from the repo root:
# `bash scripts/gpu-record-40.sh`; the files land in $OUT, to be copied under docs/):
# the installed torch/JAX/CuPy dist-info facts (the +cu130 build PyTorch's own index
# serves), `smoke --host` running every framework adapter (torch and JAX at once),
# the same with the GPU hidden (each framework must fail), and resolve/doctor with
# --gpu auto --driver auto. Needs no network; python3 3.12 with torch and jax.
set -u
OUT=${OUT:-/tmp/gpu-record-40}
mkdir -p "$OUT"
{ date -u; nvidia-smi; python3 -V; python3 -m pip list 2>/dev/null | grep -iE "torch|jax|cupy|nvidia|cuda|triton"; } > "$OUT"/env.txt 2>&1
python3 - >> "$OUT"/env.txt 2>&1 <<'PY'
import importlib.metadata as md
names = sorted({d.metadata["Name"] for d in md.distributions() if any(k in (d.metadata["Name"] or "").lower() for k in ("torch","jax","cupy","nvidia","cuda","triton"))})
for name in names:
    d = md.distribution(name)
    print("##", name, d.version)
    for r in d.requires or []:
        print("   Requires-Dist:", r)
    files = [str(f) for f in (d.files or []) if ".so" in str(f)][:4]
    print("   files:", files)
import torch
print("torch.version.cuda", torch.version.cuda, torch.__version__)
print(open(torch.__file__.replace("__init__.py", "version.py")).read())
PY
{ time PYTHONPATH=. timeout 300 python3 -m envlock smoke --host --json > "$OUT"/both.json; echo "exit $?"; } > "$OUT"/both.txt 2>&1
{ time PYTHONPATH=. timeout 240 python3 -m envlock smoke --host; echo "exit $?"; } >> "$OUT"/both.txt 2>&1
{ CUDA_VISIBLE_DEVICES="" PYTHONPATH=. timeout 150 python3 -m envlock smoke --host --no-training; echo "exit $?"; } > "$OUT"/hidden.txt 2>&1
runs=("resolve tensorflow==2.21 --gpu auto --driver auto" "resolve tensorflow==2.21 --gpu H100" "doctor" "doctor --json")
for a in "${runs[@]}"; do
  read -r -a argv <<<"$a"
  echo "\$ envlock $a"
  PYTHONPATH=. timeout 120 python3 -m envlock "${argv[@]}"
  echo "exit $?"
done > "$OUT"/resolve-doctor.txt 2>&1
tail -3 "$OUT"/*.txt
OUT="$OUT" python3 -c "import json, os; d = json.load(open(os.environ['OUT'] + '/both.json')); print(d['status'], [(f['framework'], f['status']) for f in d.get('frameworks', [])])"
