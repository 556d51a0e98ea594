"""``envlock restore`` as one call: ``run_restore(RestoreRun)``.

Checks the flags that do not go together, picks the default venv, reads the
capture's left-out lines (bad ones are exit 2 before anything is built), then runs
one of the three restores (``envlock.venv.restore``: a new venv, ``--in-place``,
``--undo``). The result (``NewVenvRestored``, ``InPlaceRestored``, ``UndoRestored``)
has ``to_dict()`` (``restore --json``, one schema per mode: docs/output.md) and
``text()``."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from envlock.errors import UsageError
from envlock.venv.install import RestoreRequest, default_venv, restore_command


@dataclass(frozen=True)
class RestoreRun:
    """``envlock restore``'s flags as typed values (``venv`` None: the default venv)."""

    dir: str
    venv: str | None = None
    base_python: str | None = None
    in_place: bool = False
    exact: bool = False
    undo: bool = False
    undo_id: str | None = None
    kernel: str | None = None
    kernel_prefix: str | None = None
    wheelhouse: str | None = None
    offline: bool = False
    index_url: str | None = None
    allow_cpu: bool = False
    quiet: bool = False  # --json: no progress, no default-venv line on stderr


def _conflicts(run: RestoreRun) -> None:
    pairs = [
        (run.undo and run.in_place, "--undo", "--in-place"),
        (run.kernel and (run.in_place or run.undo), "--kernel", "--in-place/--undo"),
        (run.exact and not run.in_place, "--exact", "a new venv (it holds only the lock)"),
        (run.undo_id and not run.undo, "--undo-id", "anything but --undo"),
        (run.kernel_prefix and not run.kernel, "--kernel-prefix", "no --kernel"),
        (run.base_python and (run.in_place or run.undo), "--base-python", "--in-place/--undo"),
    ]
    for bad, one, other in pairs:
        if bad:
            raise UsageError(
                f"{one} does not go with {other}",
                hint=f"envlock restore {run.dir} --help",
            )


def _progress(line: str) -> None:
    sys.stderr.write(f"envlock restore: {line}\n")


def run_restore(run: RestoreRun) -> NewVenvRestored | InPlaceRestored | UndoRestored:
    from envlock.venv.restore import restore, restore_in_place, restore_undo

    _conflicts(run)
    bundle = Path(run.dir)
    if run.venv:
        venv = Path(run.venv)
    else:
        venv, why = default_venv(bundle, in_place=run.in_place or run.undo, kernel=bool(run.kernel))
        if not run.quiet:
            sys.stderr.write(f"envlock restore: no --venv given: {venv}, {why}\n")
    req = RestoreRequest(
        bundle=bundle,
        venv=venv,
        base_python=run.base_python,
        wheelhouse=Path(run.wheelhouse) if run.wheelhouse else None,
        offline=run.offline,
        allow_cpu=run.allow_cpu,
        index_url=run.index_url,
        in_place=run.in_place,
        exact=run.exact,
        undo=run.undo,
        undo_id=run.undo_id,
        kernel=run.kernel,
        kernel_prefix=Path(run.kernel_prefix) if run.kernel_prefix else None,
    )
    progress = None if run.quiet else _progress
    if run.undo:
        return UndoRestored(req, restore_undo(req))
    left = _left_out(bundle)  # read and checked before anything is built
    if run.in_place:
        return InPlaceRestored(req, restore_in_place(req, progress=progress), left)
    return NewVenvRestored(req, restore(req, progress=progress), left)


def _left_out(bundle: Path) -> tuple[Any, ...]:
    """The lines the capture left out of DIR's lock (DIR/left-out.json, checked as
    input: bad ones are exit 2 before anything is built)."""
    from envlock.bundle import left_out

    found = left_out.read(bundle)
    return found.left_out if found is not None else ()


def _left_out_text(bundle: Path, left: tuple[Any, ...], python: str) -> str:
    """What restore did not bring back, because the lock does not hold it, and why;
    capture's pip commands aimed at the interpreter restored (``python``)."""
    if not left:
        return ""
    from envlock.bundle.left_out import FILE, retarget

    out = [
        f"not brought back ({len(left)}): the capture left them out of the lock "
        f"({bundle / FILE}); each with why, and what would take it in:\n"
    ]
    for item in left:
        out.append(f"  {item.describe()}\n")
        out.append(f"    take it in: {retarget(item.command, python) or 'no command yet'}\n")
    return "".join(out)


def _restart(python: str) -> str:
    return (
        f"restart the Jupyter kernel and every Python process using {python}: they still "
        "hold the modules they imported before"
    )


@dataclass(frozen=True)
class NewVenvRestored:
    """A new venv built from the lock and switched in."""

    request: RestoreRequest
    result: Any  # envlock.venv.restore.RestoreResult
    left: tuple[Any, ...]

    def to_dict(self) -> dict[str, Any]:
        result, ch = self.result, self.result.changes
        return {
            "mode": "new-venv",
            "venv": str(result.venv),
            "folder": str(result.folder),
            "previous": str(result.previous) if result.previous else None,
            "python": result.python,
            "smoke": result.smoke_status,
            "converted": result.converted,
            "compared": result.compared,
            "cleaned": list(result.cleaned),
            "added": [list(x) for x in ch.added],
            "removed": [list(x) for x in ch.removed],
            "changed": [list(x) for x in ch.changed],
            "kernel": result.kernel,
            "left_out": [item.to_dict() for item in self.left],
        }

    def text(self) -> str:
        result, ch, bundle = self.result, self.result.changes, self.request.bundle
        out = [f"{line}\n" for line in result.cleaned]
        out.append(
            f"{result.venv} -> {result.folder.name}: restored from {bundle} "
            f"(Python {result.minor}: {result.python}; smoke {result.smoke_status})\n"
        )
        if result.converted:
            out.append(
                f"  {result.venv} was a plain folder; it is now a link, the old venv kept as "
                f"{result.previous}\n"
            )
        lines = ch.lines()
        if result.compared == "no-old-venv":
            out.append(f"new venv: {len(ch.added)} distributions\n")
        elif result.compared == "old-venv-broken":
            out.append(
                f"the old venv's python did not run, so nothing to compare; "
                f"the new venv has {len(ch.added)} distributions\n"
            )
        elif lines:
            out.append(
                f"changed: {len(ch.added)} added, {len(ch.removed)} removed, "
                f"{len(ch.changed)} other version\n"
            )
            out.append("".join(f"{line}\n" for line in lines))
        else:
            out.append("no distribution changed\n")
        if result.previous is not None:
            out.append(
                f"  the previous venv stays in {result.previous.name} until the next restore "
                f"(roll back: ln -sfn {result.previous.name} {result.venv})\n"
            )
        if result.kernel is not None:
            k = result.kernel
            out.append(
                f"registered the Jupyter kernel {k['name']} ({k['display_name']}) in {k['path']}\n"
                f"  switch the notebook to the kernel {k['name']} and restart it "
                "(Kernel > Change kernel)\n"
            )
        out.append(_left_out_text(bundle, self.left, str(result.venv / "bin" / "python")))
        return "".join(out)


@dataclass(frozen=True)
class InPlaceRestored:
    """The lock synced into an interpreter in place (``--in-place``)."""

    request: RestoreRequest
    result: Any  # envlock.venv.inplace's result
    left: tuple[Any, ...]

    def to_dict(self) -> dict[str, Any]:
        from envlock.venv.inplace import undo_command

        r, p, req = self.result, self.result.plan, self.request
        return {
            "mode": "in-place",
            "python": r.python,
            "venv": str(req.venv),
            "exact": req.exact,
            "changed": r.changed,
            "installed": [list(x) for x in p.install],
            "replaced": [list(x) for x in p.replace],
            "removed": [list(x) for x in p.remove],
            "kept_extras": [list(x) for x in p.kept],
            "undo_id": r.undo_id,
            "undo_path": str(r.undo_path) if r.undo_path else None,
            "undo": undo_command(req, str(req.venv), r.undo_id) if r.undo_id else None,
            "restart": _restart(r.python) if r.changed else None,
            "left_out": [item.to_dict() for item in self.left],
        }

    def text(self) -> str:
        from envlock.venv.inplace import undo_command

        r, p, req = self.result, self.result.plan, self.request
        out = []
        if not r.changed:
            out.append(
                f"{r.python}: nothing to install, all {r.locked} locked distributions of "
                f"{req.bundle} are at their versions\n"
            )
        else:
            out.append(
                f"{r.python}: synced with {req.bundle} in place: {len(p.install)} installed, "
                f"{len(p.replace)} replaced, {len(p.remove)} removed\n"
            )
            out.append("".join(f"  + {n} {v}\n" for n, v in p.install))
            out.append("".join(f"  ~ {n} {a} -> {b}\n" for n, a, b in p.replace))
            out.append("".join(f"  - {n} {v}\n" for n, v in p.remove))
        if p.kept:
            shown = ", ".join(f"{n} {v}" for n, v in p.kept)
            out.append(f"not in the lock, left as they are: {shown}\n")
            if not req.exact:
                exact = restore_command(replace(req, exact=True))
                out.append(f"  remove them too (saved for --undo): {exact}\n")
        if r.changed:
            out.append(f"  undo (offline): {undo_command(req, str(req.venv), r.undo_id)}\n")
            out.append(f"  {_restart(r.python)}\n")
        out.append(_left_out_text(req.bundle, self.left, r.python))
        return "".join(out)


@dataclass(frozen=True)
class UndoRestored:
    """An in-place restore undone (``--undo``)."""

    request: RestoreRequest
    result: Any  # envlock.venv.restore.UndoResult

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return {
            "mode": "undo",
            "python": r.python,
            "venv": str(self.request.venv),
            "undo_id": r.undo_id,
            "undo_path": str(r.path),
            "restored": [list(x) for x in r.restored],
            "removed": [list(x) for x in r.removed],
            "warnings": list(r.warnings),
            "restart": _restart(r.python),
        }

    def text(self) -> str:
        r = self.result
        return (
            f"{r.python}: undid the in-place restore {r.undo_id}: {len(r.restored)} put back, "
            f"{len(r.removed)} removed\n"
            + "".join(f"  + {n} {v}\n" for n, v in r.restored)
            + "".join(f"  - {n} {v}\n" for n, v in r.removed)
            + "".join(f"warning: {w}\n" for w in r.warnings)
            + f"  {_restart(r.python)}\n"
        )
