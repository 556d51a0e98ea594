"""kill -9 and concurrent writers against one bundle folder: always whole afterwards.

    .venv/bin/python bench/kill_loop.py [--kills 100] [--write-kills 200] [--pairs 50]
        [--render-pairs 50] [--seed 1] [--out FILE]

Offline: a local index on 127.0.0.1 (tests/fixtures/index/fakeindex.py) serves a
tiny ``tensorflow`` 2.14.1 and 2.15.1, so ``envlock lock tensorflow==2.14`` and
``==2.15`` are real runs of the command (resolve, uv, render, the bundle writer)
that write two different bundles, A and B, into one folder.

1. ``--kills``: ``envlock lock`` processes (the other bundle each time) killed
   with SIGKILL (their whole process group, uv included) at a delay drawn
   uniformly over a whole run (measured first).
2. ``--write-kills``: ``envlock render DIR --base-image a|b`` in a process that
   has already imported and rendered once, released by a pipe and killed at a
   delay drawn uniformly over the time a render takes, so the kills land in
   the write itself (the stage each kill hit is counted).
3. ``--pairs``: two ``envlock lock`` processes (2.14 and 2.15) started together
   into one folder; ``--render-pairs``: two warmed ``envlock render`` processes
   released at the same instant. Both must exit 0.

After each: the recovery every command runs first (``recover_bundle``, the
function ``lock``, ``lock --check``, ``render`` and ``build`` call) is run,
and the folder must be whole by its manifest, be exactly A or exactly B (for
kills: the bundle before the run or the one it was writing), and hold no temp
file and no journal. Every tenth kill the next command is the real CLI
(``envlock render DIR``) instead. Prints a JSON document (and --out FILE).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fixtures.index.fakeindex import FakeIndex  # noqa: E402

from envlock.bundle.manifest import (  # noqa: E402
    JOURNAL,
    bundle_problems,
    leftovers,
    read_manifest,
    recover_bundle,
)

LOCAL_BASE = "envlock-test/bookworm-python:1"
VERSIONS = ("2.14", "2.15")
IMAGES = ("envlock-test/base-a:1", "envlock-test/base-b:1")

# A warmed `envlock render` (the real CLI entry point) waiting for a line on stdin.
RENDER_CHILD = """
import contextlib, io, sys
from envlock.cli import main
warm, folder, image = sys.argv[1:4]
with contextlib.redirect_stdout(io.StringIO()):
    main(["render", warm, "--base-image", image])
sys.stdout.write("ready\\n")
sys.stdout.flush()
sys.stdin.readline()
code = main(["render", folder, "--base-image", image])
sys.stderr.write("done\\n")
sys.stderr.flush()
sys.exit(code)
"""


def start_index() -> FakeIndex:
    idx = FakeIndex()
    for version in ("2.14.1", "2.15.1"):
        idx.add_dist(
            "tensorflow", version, tag="py3-none-manylinux_2_17_x86_64", requires=("dep-a>=1,<2",)
        )
    for v in ("1.0", "1.5"):
        idx.add_dist("dep-a", v)
    idx.start()
    server = getattr(idx, "_server", None)
    if server is not None:  # a killed uv resets its connections: expected here, not news
        server.handle_error = lambda request, address: None
    return idx


def env() -> dict[str, str]:
    out = dict(os.environ)
    out.setdefault("UV_CACHE_DIR", str(Path(tempfile.gettempdir()) / "envlock-kill-loop-uv"))
    out["PYTHONPATH"] = str(ROOT)
    return out


def lock_argv(version: str, folder: Path, index: FakeIndex) -> list[str]:
    return [
        sys.executable,
        "-m",
        "envlock",
        "lock",
        f"tensorflow=={version}",
        "--index-url",
        index.url,
        "-o",
        str(folder),
        "--base-image",
        LOCAL_BASE,
        "--python-from",
        "image",
    ]


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env(), capture_output=True, text=True, check=False)


def manifest_of(folder: Path) -> dict[str, str]:
    manifest = read_manifest(folder)
    assert manifest is not None, f"{folder}: no manifest"
    return manifest


def stage(folder: Path, before: dict[str, str]) -> str:
    """Where a kill landed, read from what it left."""
    if (folder / JOURNAL).exists():
        return "switching (journal present)"
    if leftovers(folder):
        return "temp files written"
    if read_manifest(folder) == before:
        return "before the write (or an unchanged bundle)"
    return "after the switch"


def verdict(folder: Path, wanted: list[dict[str, str]]) -> str | None:
    """None when DIR is whole, one of ``wanted``, with no temp file or journal."""
    problems = bundle_problems(folder)
    if problems:
        return "; ".join(problems)
    if read_manifest(folder) not in wanted:
        return "whole, but neither the old nor the new bundle"
    return None


def close_pipes(proc: subprocess.Popen[Any]) -> None:
    """Close the pipes to an ended child (else each is a ResourceWarning)."""
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def kill_group(proc: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    close_pipes(proc)


def lock_kills(count: int, rng: random.Random, index: FakeIndex, work: Path) -> dict[str, Any]:
    folder = work / "lock-kills"
    bundles: dict[str, dict[str, str]] = {}
    durations = []
    for version in VERSIONS * 2:  # the second round is what a warm uv cache takes
        start = time.perf_counter()
        done = run(lock_argv(version, folder, index))
        durations.append(time.perf_counter() - start)
        assert done.returncode == 0, done.stderr
        bundles[version] = manifest_of(folder)
    span = max(durations[2:]) * 1.1
    results: Counter[str] = Counter()
    stages: Counter[str] = Counter()
    failures: list[str] = []
    current = VERSIONS[1]
    for i in range(count):
        target = VERSIONS[0] if current == VERSIONS[1] else VERSIONS[1]
        delay = rng.uniform(0, span)
        proc = subprocess.Popen(
            lock_argv(target, folder, index),
            env=env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        time.sleep(delay)
        finished = proc.poll() is not None
        kill_group(proc)
        stages["finished before the kill" if finished else stage(folder, bundles[current])] += 1
        if i % 10 == 9:
            done = run([sys.executable, "-m", "envlock", "render", str(folder)])
            bad = None if done.returncode == 0 else f"render exit {done.returncode}"
        else:
            recover_bundle(folder)
            bad = None
        bad = bad or verdict(folder, [bundles[current], bundles[target]])
        results["ok" if bad is None else "bad"] += 1
        if bad:
            failures.append(f"kill {i} at {delay:.3f}s: {bad}")
        if read_manifest(folder) == bundles[target]:
            current = target
    return {
        "kills": count,
        "run_s": round(span / 1.1, 3),
        "ok": results["ok"],
        "bad": results["bad"],
        "stages": dict(stages),
        "failures": failures[:10],
    }


def render_bundles(folder: Path, index: FakeIndex) -> dict[str, dict[str, str]]:
    done = run(lock_argv(VERSIONS[1], folder, index))
    assert done.returncode == 0, done.stderr
    out = {}
    for image in IMAGES:
        done = run([sys.executable, "-m", "envlock", "render", str(folder), "--base-image", image])
        assert done.returncode == 0, done.stderr
        out[image] = manifest_of(folder)
    return out


def render_child(folder: Path, warm: Path, image: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", RENDER_CHILD, str(warm), str(folder), image],
        env=env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line != "ready\n":
        kill_group(proc)
        raise RuntimeError(f"the render child did not start: {line!r}")
    return proc


def release(*procs: subprocess.Popen[str]) -> None:
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.flush()


def write_kills(count: int, rng: random.Random, index: FakeIndex, work: Path) -> dict[str, Any]:
    folder, warm = work / "write-kills", work / "write-kills-warm"
    bundles = render_bundles(folder, index)
    render_bundles(warm, index)
    timings = []
    for image in IMAGES * 3:  # from the release to the end of main() (not the exit)
        proc = render_child(folder, warm, image)
        start = time.perf_counter()
        release(proc)
        assert proc.stderr is not None
        while proc.stderr.readline() not in ("done\n", ""):
            pass
        timings.append(time.perf_counter() - start)
        proc.wait()
        close_pipes(proc)
    span = statistics.median(timings) * 1.2
    current = IMAGES[1]
    results: Counter[str] = Counter()
    stages: Counter[str] = Counter()
    failures: list[str] = []
    for i in range(count):
        target = IMAGES[0] if current == IMAGES[1] else IMAGES[1]
        proc = render_child(folder, warm, target)
        delay = rng.uniform(0, span)
        release(proc)
        time.sleep(delay)
        finished = proc.poll() is not None
        kill_group(proc)
        stages["finished before the kill" if finished else stage(folder, bundles[current])] += 1
        recover_bundle(folder)
        bad = verdict(folder, [bundles[current], bundles[target]])
        results["ok" if bad is None else "bad"] += 1
        if bad:
            failures.append(f"kill {i} at {delay * 1000:.1f} ms: {bad}")
        if read_manifest(folder) == bundles[target]:
            current = target
    return {
        "kills": count,
        "render_ms": round(span / 1.2 * 1000, 1),
        "ok": results["ok"],
        "bad": results["bad"],
        "stages": dict(stages),
        "failures": failures[:10],
    }


def pairs(
    count: int,
    start: Callable[[Path, int], tuple[subprocess.Popen[str], subprocess.Popen[str]]],
    folder: Path,
    wanted: list[dict[str, str]],
) -> dict[str, Any]:
    results: Counter[str] = Counter()
    waited = 0
    failures: list[str] = []
    for i in range(count):
        a, b = start(folder, i)
        codes = [a.wait(), b.wait()]
        errs = "".join(p.stderr.read() if p.stderr else "" for p in (a, b))
        close_pipes(a)
        close_pipes(b)
        waited += "waiting for another envlock" in errs
        bad = None if codes == [0, 0] else f"exit codes {codes}: {errs.strip()[-300:]}"
        bad = bad or verdict(folder, wanted)
        results["ok" if bad is None else "bad"] += 1
        if bad:
            failures.append(f"pair {i}: {bad}")
    return {
        "pairs": count,
        "ok": results["ok"],
        "bad": results["bad"],
        "one_waited_for_the_other": waited,
        "failures": failures[:10],
    }


def lock_pairs(count: int, index: FakeIndex, work: Path) -> dict[str, Any]:
    folder = work / "lock-pairs"
    wanted = []
    for version in VERSIONS:
        assert run(lock_argv(version, folder, index)).returncode == 0
        wanted.append(manifest_of(folder))

    def start(folder: Path, i: int) -> tuple[subprocess.Popen[str], subprocess.Popen[str]]:
        procs = [
            subprocess.Popen(
                lock_argv(v, folder, index),
                env=env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for v in (VERSIONS if i % 2 else VERSIONS[::-1])
        ]
        return procs[0], procs[1]

    return pairs(count, start, folder, wanted)


def render_pairs(count: int, index: FakeIndex, work: Path) -> dict[str, Any]:
    folder, warm = work / "render-pairs", work / "render-pairs-warm"
    wanted = list(render_bundles(folder, index).values())
    render_bundles(warm, index)

    def start(folder: Path, i: int) -> tuple[subprocess.Popen[str], subprocess.Popen[str]]:
        a = render_child(folder, warm, IMAGES[i % 2])
        b = render_child(folder, warm, IMAGES[(i + 1) % 2])
        release(a, b)
        return a, b

    return pairs(count, start, folder, wanted)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--write-kills", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=50)
    parser.add_argument("--render-pairs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    index = start_index()
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="envlock-kill-loop-") as tmp:
            work = Path(tmp)
            report: dict[str, Any] = {"seed": args.seed}
            if args.kills:
                report["lock_kills"] = lock_kills(args.kills, rng, index, work)
            if args.write_kills:
                report["write_kills"] = write_kills(args.write_kills, rng, index, work)
            if args.pairs:
                report["lock_pairs"] = lock_pairs(args.pairs, index, work)
            if args.render_pairs:
                report["render_pairs"] = render_pairs(args.render_pairs, index, work)
    finally:
        index.stop()
    report["seconds"] = round(time.perf_counter() - started, 1)
    report["ok"] = all(
        part["bad"] == 0 for part in report.values() if isinstance(part, dict) and "bad" in part
    )
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
