"""The smoke result for people: ``describe`` (the tables ``envlock smoke`` prints),
and ``paths_for`` (the verdict per execution path for what the harness saw)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envlock.resolve.paths import GpuPathsDict
    from envlock.smoke.result import SmokeRun


def paths_for(result: SmokeRun) -> list[GpuPathsDict]:
    """The verdict per execution path for what the harness saw (its facts: the
    build's CUDA and sm targets, each GPU and driver, the cuDNN that loaded, the
    ptxas XLA found), judged by the function resolve and doctor use."""
    try:
        from envlock.matrix import libraries, load_cuda
        from envlock.matrix import paths as paths_mod
        from envlock.resolve.paths import for_smoke
    except ImportError as e:  # a GPU host with the standard library and little else
        sys.stderr.write(
            f"envlock: no verdicts per execution path ({e}); the smoke result is whole "
            "without them\n"
        )
        return []

    found = for_smoke(result, load_cuda(), paths_mod.load(), libraries.load())
    return [p.to_dict() for p in found]


def describe(result: SmokeRun) -> str:
    """The readable report: a header, the checks table (short reasons: the whole
    text is in --json and -o), the benchmark table; for a run of several
    frameworks, these tables for each framework under its own verdict line."""
    from envlock.output import short, table

    runs = [r for r in result.get("frameworks") or [] if isinstance(r, Mapping)]
    lines = []
    if len(runs) > 1:
        head = f"{result.get('status')}: " + ", ".join(_named(r) for r in runs)
    else:
        head = f"{result.get('status')}: {_named(result)}"
    image = result.get("image")
    if image:
        head += f" in {image.get('ref')}"
    lines.append(head.rstrip())
    for gpu in result.get("gpus") or []:
        lines.append(
            f"GPU: {gpu.get('name')} (compute capability {gpu.get('compute_capability')}, "
            f"{gpu.get('memory_total_mb')} MB, driver {gpu.get('driver')})"
        )
    if len(runs) > 1:
        names = {f"framework_{r.get('framework')}" for r in runs}
        own = {c.get("name") for r in runs for c in r.get("checks") or []}
        # the run's own checks (a container's, a harness crash), not a framework's
        rest = [
            c
            for c in result.get("checks", [])
            if c.get("name") not in names and c.get("name") not in own
        ]
        if rest:
            lines += ["", *_checks_table(rest)]
        for run in runs:
            lines += ["", f"{_named(run)}: {run.get('status')}"]
            lines += _framework_lines(run)
    else:
        lines += ["", *_framework_lines(result)]
    for gpu_paths in result.get("paths") or []:
        lines.append("")
        lines.append(
            f"paths on {gpu_paths.get('gpu')} (compute capability "
            f"{gpu_paths.get('compute_capability')}):"
        )
        prow = [
            [p.get("path", ""), p.get("status", ""), short(p.get("why", ""))]
            + ([short(p["fix"])] if p.get("fix") else [""])
            for p in gpu_paths.get("paths") or []
        ]
        lines.append(table(["path", "verdict", "why", "fix"], prow).rstrip())
    if result.get("duration_s") is not None:
        lines.append(f"\n({result['duration_s']} s)")
    return "\n".join(lines) + "\n"


def _named(run: Mapping[str, Any]) -> str:
    """'torch 2.5.1+cu124' (or '?' before a framework was chosen)."""
    return f"{run.get('framework') or '?'} {run.get('version') or ''}".rstrip()


def _checks_table(checks: list[Any]) -> list[str]:
    from envlock.output import short, table

    rows = [[c.get("status", ""), c.get("name", ""), short(c.get("reason", ""))] for c in checks]
    return [table(["status", "check", "reason"], rows).rstrip()]


def _framework_lines(result: Mapping[str, Any]) -> list[str]:
    """One framework's checks, matmul benchmark and training tables."""
    from envlock.output import table

    lines = _checks_table(result.get("checks") or [])
    bench = (result.get("benchmark") or {}).get("results") or []
    if bench:
        lines.append("")
        brows = []
        for r in bench:
            frac = r.get("fraction_of_peak")
            brows.append(
                [
                    f"matmul {r['n']}^3",
                    r.get("math", r.get("dtype", "")),
                    r.get("device", ""),
                    f"{r['seconds_per_op']['median'] * 1e3:.3f}",
                    f"{r['tflops']:.2f}",
                    str(r.get("peak_tflops", "-")),
                    f"{frac * 100:.0f}%" if frac is not None else "-",
                ]
            )
        lines.append(
            table(
                ["op", "math", "device", "ms (median)", "TFLOP/s", "peak", "of peak"], brows
            ).rstrip()
        )
    training = (result.get("benchmark") or {}).get("training")
    if training and training.get("runs"):
        lines.append("")
        lines.append(
            f"training: {training.get('model')}, batch {training.get('batch')} of "
            f"{training.get('input')} on {training.get('device')}"
        )
        trows = [
            [
                r.get("variant", ""),
                f"{r['seconds_per_step'] * 1e3:.2f}",
                f"{r['first_step_s']:.2f}",
                f"{r['loss_first']:.3g} -> {r['loss_last']:.3g}",
                "plain loop" if r.get("plain") else f"{r.get('speedup_vs_plain', 0):.2f}x",
            ]
            for r in training["runs"]
        ]
        lines.append(
            table(["train", "ms per step", "first step s", "loss", "vs plain"], trows).rstrip()
        )
    return lines
