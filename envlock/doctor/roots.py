"""Root findings of a platform's package list against a lock, and what the lock left out.

``envlock doctor --lock DIR --freeze FILE`` judges a published package list with
the live-venv doctor's checks (``envlock.doctor.findings.judge``); a platform
upgrade changes hundreds of pins at once, so ``fold`` names the changes that
cause the others: the Python, each framework (TensorFlow, torch, JAX, Keras)
whose version differs, with the CUDA user space each brings on either side (from
names and versions: the matrix row of a TensorFlow release, torch's ``+cuXXX``,
the -cuNN of a JAX plugin; envlock.lock.gpufacts), and folds every other package
row under the framework it belongs to by the lock's dependency graph (it requires
the framework, or the framework requires it), the rest under one row with their
count. ``restore_verdict`` says which restore brings the lock back on the
platform: in place (the same Python) or a new kernel (another one).
``left_out`` names the lines the capture could not lock (``DIR/left-out.json``):
not locked, so not checked.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from envlock.doctor.advice import Context, Finding, _version, installed

if TYPE_CHECKING:
    from envlock.model import Lock, PackageCuda
    from envlock.venv.probe import Dist, ProbeDoc

# the frameworks whose change is a root finding, in the order they are named
FRAMEWORKS = ("tensorflow", "torch", "jax", "keras")


def left_out(ctx: Context, probe: ProbeDoc | None) -> list[Finding]:
    """One INFO finding naming the lines the capture left out of the lock, each
    folded under it with its reason and the command that would take it in; what
    the inspected environment has of each name is said, never judged."""
    items = ctx.left_out
    if not items:
        return []
    from envlock.bundle.left_out import REASONS, counts, retarget

    have = installed(probe) if probe is not None else {}
    rows = []
    for item in items:
        command = retarget(item.command, ctx.python) if ctx.python else item.command
        dist = have.get(item.name) if item.name else None
        said = "listed" if probe is not None and probe.get("freeze") else "installed"
        here = f"; {said} here: {item.name} {dist.get('version')}" if dist else ""
        rows.append(
            Finding(
                f"left out {item.name or item.line}",
                "INFO",
                f"{item.line}: {REASONS[item.reason]}: {item.detail}{here}",
                command or "",
            )
        )
    n = counts(items)
    said = ", ".join(f"{n[r]} {REASONS[r]}" for r in REASONS if r in n)
    return [
        Finding(
            "left out of the lock",
            "INFO",
            f"{len(items)} line(s) of the capture are not in the lock, so not checked ({said}); "
            "each is folded here with its reason",
            folded=tuple(rows),
        )
    ]


def _facts(dists: Sequence[tuple[str, str]], lock: Lock | None) -> dict[str, PackageCuda]:
    """The CUDA of each CUDA-carrying distribution, by name, from names and
    versions (the lock's recorded facts first, read from its wheels)."""
    from envlock.lock.gpufacts import installed_facts
    from envlock.matrix import cudawheels, load_cuda

    out = {
        f.name: f
        for f in installed_facts([(n, v, None) for n, v in dists], cudawheels.load(), load_cuda())
    }
    if lock is not None and lock.gpu is not None:
        out.update({f.name: f for f in lock.gpu.packages})
    return out


def _cuda_of(framework: str, version: str | None, facts: dict[str, PackageCuda]) -> tuple[str, str]:
    """The CUDA user space ``framework`` at ``version`` brings: (what is compared,
    how it is known, in words); ("", "") when it brings none."""
    if version is None:
        return "", ""
    if framework == "tensorflow":
        from envlock.resolve import load_matrix

        release = load_matrix().tensorflow.get(_version(version) or version)
        if release is None:
            return "", ""
        said = f"CUDA {release.cuda}, cuDNN {release.cudnn}"
        return said, f"{said} (its matrix row)"
    if framework == "torch":
        f = facts.get("torch")
        if f is None or f.cuda is None:
            return "?", "CUDA not known (a CPU build, or no +cuXXX)"
        return f"CUDA {f.cuda}", f"CUDA {f.cuda} ({f.cuda_from})"
    if framework == "jax":
        plugins = [f for name, f in sorted(facts.items()) if f.family == "jax-plugin"]
        if not plugins:
            return "none", "no CUDA plugin (a CPU jax)"
        said = ", ".join(f"{f.name} {f.version} (CUDA {f.cuda})" for f in plugins)
        return said, said
    return "", ""


def _framework(
    name: str,
    got: Dist | None,
    want: str,
    where: str,
    fix: str,
    facts: tuple[dict[str, PackageCuda], dict[str, PackageCuda]],
    cuda_rows: list[Finding],
) -> Finding:
    have = str(got.get("version")) if got is not None else None
    if have is None:
        cause = f"{name} is not in {where}; the lock has {want}"
    else:
        cause = f"{name} {have} is in {where}; the lock has {want}"
    (ours, ours_said), (theirs, theirs_said) = (
        _cuda_of(name, have, facts[0]),
        _cuda_of(name, want, facts[1]),
    )
    if ours or theirs:
        if ours == theirs:
            cause += f"; its CUDA unchanged: {ours_said}"
        else:
            cause += f"; its CUDA: {ours_said or 'none'} there, {theirs_said or 'none'} in the lock"
    if cuda_rows:
        shown = "; ".join(f.cause for f in cuda_rows[:4])
        more = f" and {len(cuda_rows) - 4} more" if len(cuda_rows) > 4 else ""
        cause += f"; CUDA wheels that differ: {shown}{more}"
    return Finding(f"{name} version", "FAIL", cause, fix)


def _owner(name: str, roots: Sequence[str], lock: Lock) -> str | None:
    """The root framework a package row belongs to: one it requires, else one that
    requires it, else the nearest one it requires through others (the lock's
    graph); None when it reaches none."""
    deps = {p.name: set(p.dependencies) for p in lock.packages}
    mine = deps.get(name, set())
    for root in roots:
        if root in mine:
            return root
    for root in roots:
        if name in deps.get(root, set()):
            return root
    seen: set[str] = set()
    level = sorted(mine)
    while level:  # the nearest root it requires through others; ties in FRAMEWORKS order
        seen.update(level)
        for root in roots:
            if root in level:
                return root
        level = sorted({d for dep in level for d in deps.get(dep, ()) if d not in seen})
    return None


def fold(
    found: list[Finding], probe: ProbeDoc, ctx: Context, where: str, fix: str
) -> list[Finding]:
    """``found`` with each framework change as a root finding and every other
    package row folded under its root (or under one "packages" row), in judge's
    order otherwise; a framework row of the lock's that is the same stays folded
    into nothing (the package PASS row counts it)."""
    lock = ctx.lock
    if lock is None:
        return found
    from envlock.doctor.builds import same_torch_build

    have = installed(probe)
    locked = {p.name: p.version for p in lock.packages}
    facts = (
        _facts([(n, str(d.get("version"))) for n, d in have.items()], None),
        _facts([(p.name, p.version) for p in lock.packages], lock),
    )
    roots: list[str] = []
    for name in FRAMEWORKS:
        got, want = have.get(name), locked.get(name)
        if want is None:  # not locked: an extra, or a line the capture left out
            continue
        if got is not None and (
            _version(str(got.get("version"))) == _version(want)
            or same_torch_build(ctx, name, str(got.get("version")), want)
        ):
            continue
        roots.append(name)
    if fix:  # the Python row's restore is the one the platform takes too
        found = [
            replace(f, fix=fix) if f.check == "python" and f.status == "FAIL" else f for f in found
        ]
    rows = [f for f in found if f.check.startswith("package ") and f.status != "PASS"]
    if not rows and not roots:
        return found
    groups: dict[str, list[Finding]] = {r: [] for r in roots}
    rest: list[Finding] = []
    for f in rows:
        name = f.check.split(" ", 1)[1]
        if name in groups:
            continue  # the root row says it
        owner = _owner(name, roots, lock)
        (groups[owner] if owner else rest).append(f)
    heads: list[Finding] = []
    for name in roots:
        cuda = [f for f in groups[name] if f.check.split(" ", 1)[1] in facts[0] | facts[1]]
        head = _framework(name, have.get(name), locked[name], where, fix, facts, cuda)
        if name == "tensorflow" and have.get(name) is not None and locked.get(name):
            from envlock.doctor.findings import keras_jump

            jump = keras_jump(locked[name], str(have[name].get("version")), ctx)
            if jump is not None:
                groups[name].insert(0, jump)
        heads.append(_with_folded(head, groups[name]))
    if rest:
        heads.append(
            _with_folded(
                Finding(
                    "packages",
                    "FAIL",
                    f"other locked packages differ in {where} from the lock (none of them "
                    "requires or is required by a framework named above)",
                    fix,
                ),
                rest,
            )
        )
    out: list[Finding] = []
    placed = False
    for f in found:
        if f in rows:
            if not placed:
                out += heads
                placed = True
            continue
        out.append(f)
    if not placed:
        out += heads
    return out


def _with_folded(head: Finding, rows: list[Finding]) -> Finding:
    if not rows:
        return head
    return replace(
        head,
        cause=f"{head.cause}; {len(rows)} package findings follow from it (folded)",
        folded=tuple(rows),
    )


def restore_verdict(ctx: Context, python: str | None) -> Finding | None:
    """Which restore brings the lock back on the platform whose list was judged:
    in place into the notebook's interpreter when it runs the lock's Python (a
    ``%envlock`` cell names the kernel's interpreter itself), else a new venv of the
    lock's Python registered as a Jupyter kernel beside the platform's."""
    lock = ctx.lock
    if lock is None or not ctx.lock_dir:
        return None
    want = lock.resolution.python
    bundle = ctx.lock_dir
    cpu = ["--allow-cpu"] if ctx.allow_cpu else []  # as doctor was asked: restore's GPU check
    if python is None or python == want:
        said = (
            f"the platform runs Python {python}, the lock's"
            if python
            else f"a freeze names no Python: if the platform runs Python {want}, the lock's"
        )
        return Finding(
            "restore",
            "INFO",
            f"in place: {said}; in a cell of the notebook, restore syncs the lock into the "
            "kernel's interpreter (hash-checked; what it replaces is saved, --undo puts it "
            "back), then restart the kernel",
            shlex.join(["%envlock", "restore", bundle, "--in-place", *cpu]),
        )
    kernel = f"envlock-py{want}"
    has_ipykernel = any(p.name == "ipykernel" for p in lock.packages)
    if not has_ipykernel:
        return Finding(
            "restore",
            "INFO",
            f"a new venv: the platform runs Python {python}, the lock is for {want}; restore "
            f"builds a Python {want} venv beside the platform's (the lock has no ipykernel, "
            "so it cannot be registered as a kernel)",
            shlex.join(["envlock", "restore", bundle, *cpu]),
        )
    return Finding(
        "restore",
        "INFO",
        f"a new kernel: the platform runs Python {python}, the lock is for {want}; restore "
        f"builds a Python {want} venv beside the platform's and registers it as the Jupyter "
        f"kernel {kernel} (the platform's own kernel stays as it is)",
        shlex.join(["envlock", "restore", bundle, "--kernel", kernel, *cpu]),
    )
