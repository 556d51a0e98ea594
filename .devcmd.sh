mkdir -p $OUT
{ nvidia-smi; python3 -V; python3 -m pip list 2>/dev/null | grep -iE "torch|jax|cupy|nvidia|cuda|triton"; } > $OUT/env.txt 2>&1
python3 - > $OUT/dists.txt 2>&1 <<'PY'
import importlib.metadata as md
names = sorted({d.metadata["Name"] for d in md.distributions() if any(k in d.metadata["Name"].lower() for k in ("torch","jax","cupy","nvidia","cuda","triton"))})
for name in names:
    d = md.distribution(name)
    print("##", name, d.version)
    for r in d.requires or []:
        print("   Requires-Dist:", r)
    files = [str(f) for f in (d.files or []) if ".so" in str(f)][:6]
    print("   files:", files)
import torch
print("torch.version.cuda", torch.version.cuda, torch.__version__)
print(open(torch.__file__.replace("__init__.py", "version.py")).read())
PY
PYTHONPATH=. timeout 240 python3 -m envlock smoke --host > $OUT/smoke-host.txt 2>&1; echo "rc=$?" >> $OUT/smoke-host.txt
PYTHONPATH=. timeout 60 python3 -m envlock resolve tensorflow==2.21 --gpu auto --driver auto > $OUT/resolve.txt 2>&1; echo "rc=$?" >> $OUT/resolve.txt
PYTHONPATH=. timeout 120 python3 -m envlock doctor > $OUT/doctor.txt 2>&1; echo "rc=$?" >> $OUT/doctor.txt
tail -3 $OUT/*.txt
