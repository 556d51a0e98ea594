#!/usr/bin/env bash
# The GPU machine's record for issue 43 (run by the `device` tool from the repo root:
# `bash scripts/gpu-record-43.sh`; the files land in $OUT, to be copied under docs/):
# what `resolve` answers for torch and JAX on this machine's GPU and driver
# (--gpu auto --driver auto), to compare with the builds installed here
# (torch 2.11.0+cu130, JAX 0.11.2 with jax-cuda13-plugin); the machine's freeze; and
# the METADATA (and RECORD-listed version files) of every torch/jax/nvidia/cuda
# distribution, from which a lock for this target is made off the machine. Also the
# sm targets torch itself reports (torch.cuda.get_arch_list()), which its wheel does
# not state in any text member. Needs no network, no uv, docker or cryptography:
# resolve reads the packaged matrices only. python3 3.12 with torch and jax.
set -u
OUT=${OUT:-/tmp/gpu-record-43}
mkdir -p "$OUT"/metadata
{ date -u; nvidia-smi; python3 -V; } > "$OUT"/env.txt 2>&1
python3 -m pip freeze > "$OUT"/pip-freeze.txt 2> "$OUT"/pip-freeze.err
# every torch/jax/nvidia/cuda/triton distribution's METADATA, as installed
OUT="$OUT" python3 - > "$OUT"/metadata/index.txt 2>&1 <<'PY'
import importlib.metadata as md, os, re
out = os.environ["OUT"] + "/metadata"
keys = ("torch", "jax", "nvidia", "cuda", "triton")
seen = set()
for d in md.distributions():
    name = d.metadata["Name"] or ""
    if not any(k in name.lower() for k in keys) or name.lower() in seen:
        continue
    seen.add(name.lower())
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", f"{name}-{d.version}")
    text = d.read_text("METADATA") or ""
    with open(f"{out}/{safe}.METADATA", "w", encoding="utf-8") as f:
        f.write(text)
    print(name, d.version, f"{safe}.METADATA", len(text))
PY
python3 - > "$OUT"/torch-jax-facts.txt 2>&1 <<'PY'
import importlib.metadata as md
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda)
print("torch/version.py:")
print(open(torch.__file__.replace("__init__.py", "version.py")).read())
print("cudnn", torch.backends.cudnn.version(), "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else None)
print("arch_list", torch.cuda.get_arch_list())
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))
try:
    import jax
    print("jax", jax.__version__, [d for d in jax.devices()])
    for n in ("jax-cuda13-plugin", "jax-cuda13-pjrt", "jax-cuda12-plugin", "jaxlib"):
        try:
            print(n, md.version(n))
        except md.PackageNotFoundError:
            print(n, "absent")
except Exception as e:  # noqa: BLE001 - recorded, not fatal
    print("jax:", type(e).__name__, e)
PY
runs=(
  "resolve torch==2.11 --gpu auto --driver auto"
  "resolve torch==2.11 --gpu auto --driver auto --json"
  "resolve jax[cuda13] --gpu auto --driver auto"
  "resolve jax[cuda13] --gpu auto --driver auto --json"
  "resolve torch==2.11 jax[cuda13] --gpu auto --driver auto"
  "resolve jax[cuda] --gpu auto --driver auto"
)
for a in "${runs[@]}"; do
  read -r -a argv <<<"$a"
  echo "\$ envlock $a"
  PYTHONPATH=. timeout 120 python3 -m envlock "${argv[@]}"
  echo "exit $?"
done > "$OUT"/resolve.txt 2>&1
# what the resolve path imported: nothing but the standard library, packaging and envlock
PYTHONPATH=. python3 -X importtime -m envlock resolve torch==2.11 --gpu auto --driver auto \
  2>&1 >/dev/null | awk -F'|' '{print $3}' | sed 's/^ *//' | cut -d. -f1 | sort -u > "$OUT"/imports.txt
grep -nE "^(uv|docker|cryptography|requests|urllib3|rich|jinja2)$" "$OUT"/imports.txt && echo "UNEXPECTED IMPORTS" >> "$OUT"/resolve.txt
tail -n 4 "$OUT"/*.txt
