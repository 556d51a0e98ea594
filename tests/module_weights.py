"""Write tests/module-times.json: each test module's wall and CPU seconds in a full run.

tests/conftest.py hands the modules to the pytest-xdist workers longest first by
its wall seconds (the way pytest-split keeps its .test_durations): with --dist loadfile a
long module handed out late ran alone at the end while the other core idled.
Made from a run with ENVLOCK_TEST_CPU set:

    ENVLOCK_TEST_CPU=/tmp/run ./tests/run.sh
    .venv/bin/python tests/module_weights.py /tmp/run

Stale numbers only change the order, never what runs; a module missing from the
file goes after the measured ones (before them if it has a slow test).
"""

from __future__ import annotations

import glob
import json
import sys
from collections import Counter
from pathlib import Path

OUT = Path(__file__).resolve().parent / "module-times.json"


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    # the main run's workers (gw0, gw1, ...); "main" is a run without xdist
    parts = glob.glob(f"{sys.argv[1]}.gw*.json")
    if not parts:
        print(
            f"no {sys.argv[1]}.gw*.json: run the suite with ENVLOCK_TEST_CPU set", file=sys.stderr
        )
        return 2
    cpu: Counter[str] = Counter()
    wall: Counter[str] = Counter()
    for part in parts:
        for nodeid, seconds in json.loads(Path(part).read_text(encoding="utf-8")).items():
            cpu[nodeid.split("::", 1)[0]] += seconds
    for part in glob.glob(f"{sys.argv[1]}.wall.gw*.json"):
        for nodeid, (start, end) in json.loads(Path(part).read_text(encoding="utf-8")).items():
            wall[nodeid.split("::", 1)[0]] += end - start
    doc = {
        "note": "each test module's seconds in one full run (wall, CPU of this process and "
        "the subprocesses it waited for); made by tests/module_weights.py",
        "modules": {
            module: {"wall": round(wall[module], 1), "cpu": round(cpu[module], 1)}
            for module in sorted(cpu)
        },
    }
    tmp = OUT.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    tmp.replace(OUT)
    print(f"{OUT}: {len(cpu)} modules, {sum(wall.values()):.0f} s, {sum(cpu.values()):.0f} CPU-s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
