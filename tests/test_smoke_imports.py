"""`envlock smoke --host` runs on GPU hosts that often lack docker,
cryptography and uv: its import path must not need them."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = r"""
import contextlib, io, json, sys
from envlock.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    code = main(["smoke", "--host", "--allow-cpu", "--json"])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def test_smoke_host_imports_neither_docker_cryptography_nor_uv() -> None:
    # all three are installed here: the test fails if the path imports any of them
    for name in ("docker", "cryptography", "uv"):
        __import__(name)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    result = json.loads(proc.stdout)
    assert result["code"] in (0, 1)  # the harness ran (no framework here: FAILED)
    heavy = [m for m in result["modules"] if m.split(".")[0] in ("docker", "cryptography", "uv")]
    assert heavy == []
