"""``envlock restore DIR --in-place`` and ``--undo``: sync the lock into a given
interpreter, with an undo store that works offline.

The target is any interpreter (a venv's ``bin/python``, a system Python, a
Jupyter kernel's ``sys.executable``). What it has is read by a small probe run
in it (``importlib.metadata``: name, version and, for the distributions that
will be touched, the files of their RECORD). The plan compares that with the
lock by name and version, as ``uv pip sync`` and pip-sync do: a locked
distribution missing or at another version is installed with the lock's
hashes (``uv pip install --require-hashes --no-deps`` of only those lines);
distributions the lock does not name ("extras") are kept and listed, or, with
``--exact``, removed (``uv pip uninstall``). pip, setuptools and wheel are
never removed as extras (pip-sync keeps them too; doctor does not count them).

Before anything is replaced or removed, every file of the affected
distributions' RECORDs is saved into the undo store (a hard link on the same
file system, else a copy: ``envlock.venv.undostore``). The store is the user's
own (``envlock.userstate``: ``~/.local/state/envlock/undo/<environment>/<id>/``,
mode 0700), never the bundle folder: a bundle is input (a colleague's, a pull
request's) and often shared, so it must neither say what gets written back
nor receive copies of an environment's files. ``files/`` holds the saved files
(numbered), ``manifest.json`` says what was saved (path, kind, sha256, mode)
and what the sync installs, under a MAC keyed by the user's secret. The entry
is filled under a temp name (``.tmp-<id>``) and renamed into place when
complete, so a half-saved entry is never offered.

A RECORD is the environment's own text, so it is checked before anything is
copied: every path must lie inside the environment (its prefix, its install
scheme's folders, the user site where enabled; the folder it is in resolved
through links), and be a regular file or a link. A path outside, or a FIFO, a
device, a socket, refuses the sync with nothing changed. ``--undo`` applies
only paths inside the environment as the probe sees it then, and only copies
whose sha256 matches the manifest: it uninstalls what the sync put in place
and copies the saved files back, writing no file through a link. No index, no
download, so it works for builds the index no longer has.
"""

from __future__ import annotations

import os
import shlex
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from envlock.errors import EnvironmentFailure, UsageError
from envlock.readers import shown
from envlock.venv.installed import probe
from envlock.venv.undostore import (
    MANIFEST,
    UNDO_SCHEMA,
    UndoEntry,
    file_of,
    put_back,
    read_entries,
    read_entry,
    save,
    sha256_of,
    store,
    write_json,
)

if TYPE_CHECKING:
    from envlock.model import Lock
    from envlock.venv.install import RestoreRequest

OLD_UNDO_DIR = ".envlock-undo"  # inside the bundle, before envlock.undo/v2: never read
# never removed as extras: the interpreter's own installers (pip-sync keeps them too)
KEEP = frozenset({"pip", "setuptools", "wheel", "distribute"})


@dataclass(frozen=True)
class Plan:
    install: tuple[tuple[str, str], ...]  # locked, missing here
    replace: tuple[tuple[str, str, str], ...]  # name, installed version, locked version
    remove: tuple[tuple[str, str], ...]  # extras removed (--exact)
    kept: tuple[tuple[str, str], ...]  # extras left in place


def plan(lock: Lock, have: dict[str, str], exact: bool) -> Plan:
    from packaging.version import InvalidVersion, Version

    def same(a: str, b: str) -> bool:
        try:
            return Version(a) == Version(b)
        except InvalidVersion:
            return a == b

    locked = {p.name: p.version for p in lock.packages}
    extras = sorted((n, v) for n, v in have.items() if n not in locked)
    removable = [(n, v) for n, v in extras if exact and n not in KEEP]
    return Plan(
        install=tuple((n, v) for n, v in sorted(locked.items()) if n not in have),
        replace=tuple(
            (n, have[n], v) for n, v in sorted(locked.items()) if n in have and not same(have[n], v)
        ),
        remove=tuple(removable),
        kept=tuple(x for x in extras if x not in removable),
    )


@dataclass(frozen=True)
class InPlaceResult:
    python: str  # the interpreter synced (its sys.executable)
    plan: Plan
    undo_id: str | None
    undo_path: Path | None
    locked: int

    @property
    def changed(self) -> bool:
        return bool(self.plan.install or self.plan.replace or self.plan.remove)


@dataclass(frozen=True)
class UndoResult:
    python: str
    undo_id: str
    path: Path
    restored: tuple[tuple[str, str], ...]  # distributions put back
    removed: tuple[tuple[str, str], ...]  # what the sync had installed, taken out
    warnings: tuple[str, ...] = field(default=())


# ----------------------------------------------------------------- uv


def _uv(argv: list[str], doing: str, offline: bool = False) -> None:
    from envlock.lock.uv import uv_env
    from envlock.venv.install import INSTALL_TIMEOUT, run_step

    env = uv_env()
    if offline:
        env["UV_OFFLINE"] = "1"
    run_step(argv, doing, INSTALL_TIMEOUT, env)


def _uninstall(python: str, names: list[str], offline: bool = False) -> None:
    from envlock.lock.uv import uv_bin

    if names:
        argv = [uv_bin(), "pip", "uninstall", "--python", python, "--no-config", *names]
        _uv(argv, f"uninstalling {', '.join(names)} from {python}", offline)


# ----------------------------------------------------------------- sync / undo


def undo_command(req: RestoreRequest, python: str, uid: str | None = None) -> str:
    argv = ["envlock", "restore", str(req.bundle), "--venv", python, "--undo"]
    return shlex.join(argv + (["--undo-id", uid] if uid else []))


def _fix(req: RestoreRequest) -> str:
    return (
        "build a new venv instead (the old one stays as it is): envlock restore "
        f"{shlex.quote(str(req.bundle))} --venv NEW_VENV_PATH"
    )


def sync(req: RestoreRequest, lock: Lock, python: str, say: Callable[[str], None]) -> InPlaceResult:
    """Install what the lock has and ``python`` lacks (or has at another version);
    with ``req.exact`` remove what the lock does not name; undo saved first."""
    from envlock.venv.install import (
        build_constraints_file,
        from_source_line,
        install_argv,
        requirement_lines,
    )

    before = probe(python)
    if before.minor != lock.resolution.python:
        raise UsageError(
            f"--venv {python} is Python {before.minor}; the lock is for Python "
            f"{lock.resolution.python}, so it cannot be synced in place",
            hint="build a new venv of the lock's Python instead: envlock restore "
            f"{shlex.quote(str(req.bundle))} --venv NEW_VENV_PATH",
        )
    p = plan(lock, before.versions, req.exact)
    if not (p.install or p.replace or p.remove):
        return InPlaceResult(before.executable, p, None, None, len(lock.packages))
    touched = [(n, old) for n, old, _ in p.replace] + list(p.remove)
    inst = probe(python, {n for n, _ in touched}) if touched else before
    missing = [n for n, _ in touched if inst.files.get(n) is None]
    if missing:
        raise UsageError(
            f"{', '.join(missing)} in {python} has no RECORD, so its files cannot be saved "
            "for --undo; nothing was changed",
            hint=_fix(req),
        )
    doc: UndoEntry = {
        "schema": UNDO_SCHEMA,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": python,
        "executable": before.executable,
        "prefix": before.prefix,
        "bundle": str(Path(os.path.abspath(req.bundle))),
        "exact": req.exact,
        "installed": [[n, v] for n, v in p.install] + [[n, v] for n, _, v in p.replace],
        "removed": [[n, v] for n, v in p.remove],
    }
    say(f"saving {len(touched)} distributions for --undo")
    uid, entry = save(inst, touched, doc, _fix(req))
    todo = {n for n, _ in p.install} | {n for n, _, _ in p.replace}
    try:
        if todo:
            with tempfile.TemporaryDirectory(prefix="envlock-sync-") as folder:
                subset = Path(folder) / "requirements.txt"
                subset.write_text(requirement_lines(lock, todo, req.wheelhouse), encoding="utf-8")
                say(f"installing {len(todo)} locked distributions (hash-checked)")
                built = from_source_line(lock, todo)
                if built:
                    say(built)
                with build_constraints_file(lock, todo) as build:
                    argv = install_argv(req, Path(python), subset, build)
                    _uv(argv, f"the hashed install into {python}")
        if p.remove:
            say(f"removing {len(p.remove)} distributions not in the lock (--exact)")
            _uninstall(python, [n for n, _ in p.remove])
    except EnvironmentFailure as e:
        raise EnvironmentFailure(
            f"{e.message}\n(what was there before is saved as undo {uid})",
            hint=f"put it back: {undo_command(req, python, uid)}",
        ) from None
    write_json(entry / MANIFEST, {**read_entry(entry), "state": "applied"})
    return InPlaceResult(before.executable, p, uid, entry, len(lock.packages))


def undo(req: RestoreRequest, python: str, uid: str | None) -> UndoResult:
    """Put back what the newest (or ``uid``) in-place sync of ``python`` from this
    bundle replaced or removed, and take out what it installed; offline."""
    here = probe(python)
    top = store(here.prefix)
    entries, bad = read_entries(here.prefix)
    bundle = str(Path(os.path.abspath(req.bundle)))
    entries = [
        e
        for e in entries
        if e[2].get("executable") == here.executable
        and e[2].get("bundle") == bundle
        and e[2].get("state") in ("saved", "applied")
    ]
    if uid is not None:
        entries = [e for e in entries if e[0] == uid]
    newest = entries[-1][0] if entries else ""
    blocking = [b for b in bad if (b.name == uid if uid is not None else b.name > newest)]
    if blocking:
        raise EnvironmentFailure(
            f"the undo store of {here.executable} holds entries that are damaged or that "
            f"this user's envlock did not write: {', '.join(b.name for b in blocking)}; "
            "nothing was undone",
            hint="remove them, then undo again: rm -r "
            + " ".join(shlex.quote(str(b)) for b in blocking),
        )
    if not entries:
        what = f"undo {uid}" if uid else "no in-place restore"
        old = Path(bundle) / OLD_UNDO_DIR
        note = (
            f" ({old} was saved inside the bundle by an earlier envlock; a bundle folder "
            "is input others may write, so envlock no longer undoes from it)"
            if old.is_dir()
            else ""
        )
        raise UsageError(
            f"{what} of {here.executable} from {req.bundle} to undo in {top}{note}",
            hint=f"list what is saved there: ls -l {shlex.quote(str(top))}",
        )
    name, entry, doc = entries[-1]
    saved = {str(s["name"]): s for s in doc.get("saved", [])}
    files = [f for s in saved.values() for f in s["files"]]
    memo: dict[str, bool] = {}
    for f in files:
        if not here.inside(f["path"], memo):
            raise UsageError(
                f"undo {name} names {shown(f['path'])}, outside the environment of "
                f"{here.executable} ({here.prefix}); nothing was undone",
                hint=f"remove that entry: rm -r {shlex.quote(str(entry))}",
            )
        if f["kind"] == "file" and sha256_of(entry / file_of(f["index"])) != f["sha256"]:
            raise EnvironmentFailure(
                f"undo {name}: the saved copy of {shown(f['path'])} does not match its "
                "sha256; nothing was undone",
                hint=f"the store was damaged; remove that entry: rm -r {shlex.quote(str(entry))}",
            )
    installed = [(str(n), str(v)) for n, v in doc.get("installed", [])]
    out = sorted({n for n, _ in installed} | set(saved))
    _uninstall(python, [n for n in out if n in here.versions], offline=True)
    current = ""
    made: set[str] = set()
    try:
        for f in files:
            current = f["path"]
            put_back(here, entry, f, made)
    except OSError as e:
        raise EnvironmentFailure(
            f"undo {name}: cannot write {shown(current)} back: {e.strerror or e}",
            hint="free the disk or fix the permissions, then again: "
            + undo_command(req, python, name),
        ) from None
    after = probe(python).versions
    warnings = tuple(
        f"{n}: {after.get(n, 'missing')} after the undo, saved {s['version']}"
        for n, s in saved.items()
        if after.get(n) != s["version"]
    )
    write_json(entry / MANIFEST, {**doc, "state": "undone"})
    return UndoResult(
        python=here.executable,
        undo_id=name,
        path=entry,
        restored=tuple((n, str(s["version"])) for n, s in sorted(saved.items())),
        removed=tuple((n, v) for n, v in installed if n not in saved),
        warnings=warnings,
    )
