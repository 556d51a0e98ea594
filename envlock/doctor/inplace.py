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
distributions' RECORDs is copied into the undo store,
``DIR/.envlock-undo/<id>/`` (``files/`` mirrors the absolute paths,
``manifest.json`` says what was saved and what the sync installs). The entry is
filled under a temp name (``.tmp-<id>``) and renamed into place when complete,
so a half-saved entry is never offered. ``--undo`` uninstalls what the sync put
in its place and copies the saved files back: no index, no download, so it
works for builds the index no longer has.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

from envlock.errors import EnvironmentFailure, UsageError

if TYPE_CHECKING:
    from envlock.doctor.install import RestoreRequest
    from envlock.model import Lock

UNDO_DIR = ".envlock-undo"
UNDO_SCHEMA = "envlock.undo/v1"
MANIFEST = "manifest.json"
# never removed as extras: the interpreter's own installers (pip-sync keeps them too)
KEEP = frozenset({"pip", "setuptools", "wheel", "distribute"})

_PROBE = r"""
import json, os, re, sys
from importlib import metadata
want = set(json.loads(sys.argv[1]))
seen, out = set(), []
for d in metadata.distributions():
    name = d.metadata["Name"]
    if not name:
        continue
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in seen:  # the first on sys.path wins, as for import
        continue
    seen.add(key)
    row = {"name": key, "version": d.version}
    if key in want:
        files = d.files
        row["files"] = None if files is None else sorted(
            {os.path.abspath(str(f.locate())) for f in files}
        )
    out.append(row)
print(json.dumps({"executable": sys.executable, "prefix": sys.prefix,
                  "minor": "%d.%d" % sys.version_info[:2], "dists": out}))
"""


@dataclass(frozen=True)
class Installed:
    executable: str
    prefix: str
    minor: str
    versions: dict[str, str]
    files: dict[str, list[str] | None]  # for the names asked for


def probe(python: str, want: set[str] | frozenset[str] = frozenset()) -> Installed:
    """What ``python`` has installed (without this shell's PYTHONPATH/PYTHONHOME)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    with tempfile.TemporaryDirectory(prefix="envlock-restore-") as cwd:  # nothing to shadow
        try:
            out = subprocess.run(
                [python, "-c", _PROBE, json.dumps(sorted(want))],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise EnvironmentFailure(f"{python} did not answer within 120 s") from None
        except OSError as e:
            raise UsageError(
                f"--venv {python}: cannot run it: {e.strerror or e}",
                hint="give a venv folder or an interpreter that runs",
            ) from None
    try:
        doc = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no output"]
        raise EnvironmentFailure(
            f"{python} could not list its distributions (exit {out.returncode}): {tail[0]}",
            hint=f"check that it starts: {shlex.quote(python)} -c pass",
        ) from None
    return Installed(
        executable=str(doc["executable"]),
        prefix=str(doc["prefix"]),
        minor=str(doc["minor"]),
        versions={str(d["name"]): str(d["version"]) for d in doc["dists"]},
        files={str(d["name"]): d.get("files") for d in doc["dists"] if "files" in d},
    )


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


# ----------------------------------------------------------------- the store


def store(bundle: Path) -> Path:
    return Path(os.path.abspath(bundle)) / UNDO_DIR


def _new_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


class SavedDist(TypedDict):
    name: str
    version: str
    files: list[str]  # their RECORD paths, copied under the entry's files/


class UndoEntry(TypedDict, total=False):
    """An undo entry's manifest (schema UNDO_SCHEMA): what an in-place restore changed
    and saved, and how far it got (state: saved, applied, undone)."""

    schema: str
    created: str
    python: str
    executable: str
    bundle: str
    exact: bool
    installed: list[list[str]]  # [name, version] put in
    removed: list[list[str]]  # [name, version] taken out (--exact)
    id: str
    saved: list[SavedDist]
    state: str


def _write_json(path: Path, doc: UndoEntry) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _mirror(root: Path, path: str) -> Path:
    return root / "files" / path.lstrip(os.sep)


def save(
    bundle: Path,
    inst: Installed,
    names: list[tuple[str, str]],
    doc: UndoEntry,
) -> tuple[str, Path]:
    """Copy every RECORD file of ``names`` into a new undo entry; (id, its folder)."""
    top = store(bundle)
    top.mkdir(parents=True, exist_ok=True)
    uid = _new_id()
    tmp = top / f".tmp-{uid}"
    saved: list[SavedDist] = []
    try:
        tmp.mkdir()
        for name, version in names:
            files = inst.files.get(name) or []
            kept = []
            for path in files:
                if not os.path.lexists(path) or os.path.isdir(path) and not os.path.islink(path):
                    continue  # a RECORD line for a file already gone (or a folder)
                dest = _mirror(tmp, path)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, dest, follow_symlinks=False)
                kept.append(path)
            saved.append({"name": name, "version": version, "files": kept})
        _write_json(tmp / MANIFEST, {**doc, "id": uid, "saved": saved, "state": "saved"})
        os.rename(tmp, top / uid)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return uid, top / uid


def _entries(bundle: Path) -> list[tuple[str, Path, UndoEntry]]:
    top = store(bundle)
    out = []
    if top.is_dir():
        for entry in sorted(top.iterdir()):
            if entry.name.startswith(".") or not (entry / MANIFEST).is_file():
                continue
            try:
                doc = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(doc, dict) and doc.get("schema") == UNDO_SCHEMA:
                out.append((entry.name, entry, cast(UndoEntry, doc)))  # as we wrote it
    return out


# ----------------------------------------------------------------- uv


def _uv(argv: list[str], doing: str, offline: bool = False) -> None:
    from envlock.doctor.install import INSTALL_TIMEOUT, run_step
    from envlock.lock.uv import uv_env

    env = uv_env()
    if offline:
        env["UV_OFFLINE"] = "1"
    run_step(argv, doing, INSTALL_TIMEOUT, env)


def _uninstall(python: str, names: list[str], offline: bool = False) -> None:
    from envlock.lock.uv import uv_bin

    if names:
        argv = [uv_bin(), "pip", "uninstall", "--python", python, "--no-config", *names]
        _uv(argv, f"uninstalling {', '.join(names)} from {python}", offline)


def requirement_lines(lock: Lock, names: set[str]) -> str:
    """``name==version --hash=...`` lines of the locked ``names`` (every wheel's sha256)."""
    lines = []
    for p in lock.packages:
        if p.name in names:
            hashes = " ".join(f"--hash=sha256:{w.sha256}" for w in p.wheels)
            lines.append(f"{p.name}=={p.version} {hashes}\n")
    return "".join(lines)


# ----------------------------------------------------------------- sync / undo


def undo_command(req: RestoreRequest, python: str, uid: str | None = None) -> str:
    argv = ["envlock", "restore", str(req.bundle), "--venv", python, "--undo"]
    return shlex.join(argv + (["--undo-id", uid] if uid else []))


def sync(req: RestoreRequest, lock: Lock, python: str, say: Callable[[str], None]) -> InPlaceResult:
    """Install what the lock has and ``python`` lacks (or has at another version);
    with ``req.exact`` remove what the lock does not name; undo saved first."""
    from envlock.doctor.install import install_argv

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
            hint="build a new venv instead (the old one stays as it is): envlock restore "
            f"{shlex.quote(str(req.bundle))} --venv NEW_VENV_PATH",
        )
    doc: UndoEntry = {
        "schema": UNDO_SCHEMA,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": python,
        "executable": before.executable,
        "bundle": str(Path(os.path.abspath(req.bundle))),
        "exact": req.exact,
        "installed": [[n, v] for n, v in p.install] + [[n, v] for n, _, v in p.replace],
        "removed": [[n, v] for n, v in p.remove],
    }
    say(f"saving {len(touched)} distributions for --undo")
    uid, entry = save(req.bundle, inst, touched, doc)
    todo = {n for n, _ in p.install} | {n for n, _, _ in p.replace}
    try:
        if todo:
            subset = entry / "requirements.txt"
            subset.write_text(requirement_lines(lock, todo), encoding="utf-8")
            say(f"installing {len(todo)} locked distributions (hash-checked)")
            _uv(install_argv(req, Path(python), subset), f"the hashed install into {python}")
        if p.remove:
            say(f"removing {len(p.remove)} distributions not in the lock (--exact)")
            _uninstall(python, [n for n, _ in p.remove])
    except EnvironmentFailure as e:
        raise EnvironmentFailure(
            f"{e.message}\n(what was there before is saved as undo {uid})",
            hint=f"put it back: {undo_command(req, python, uid)}",
        ) from None
    manifest: UndoEntry = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
    _write_json(entry / MANIFEST, {**manifest, "state": "applied"})
    return InPlaceResult(before.executable, p, uid, entry, len(lock.packages))


def undo(req: RestoreRequest, python: str, uid: str | None) -> UndoResult:
    """Put back what the newest (or ``uid``) in-place sync of ``python`` replaced or
    removed, and take out what it installed; offline."""
    here = probe(python)
    entries = [
        e
        for e in _entries(req.bundle)
        if e[2].get("executable") == here.executable and e[2].get("state") in ("saved", "applied")
    ]
    if uid is not None:
        entries = [e for e in entries if e[0] == uid]
    if not entries:
        what = f"undo {uid}" if uid else "no in-place restore"
        raise UsageError(
            f"{what} of {here.executable} to undo in {store(req.bundle)}",
            hint=f"list what is saved there: ls -l {shlex.quote(str(store(req.bundle)))}",
        )
    name, entry, doc = entries[-1]
    saved = {str(s["name"]): s for s in doc.get("saved", [])}
    installed = [(str(n), str(v)) for n, v in doc.get("installed", [])]
    now = here.versions
    out = sorted({n for n, _ in installed} | set(saved))
    _uninstall(python, [n for n in out if n in now], offline=True)
    for s in saved.values():
        for path in s["files"]:
            src = _mirror(entry, str(path))
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            if os.path.lexists(path) and not os.path.isdir(path):
                os.unlink(path)
            shutil.copy2(src, path, follow_symlinks=False)
    after = probe(python).versions
    warnings = tuple(
        f"{n}: {after.get(n, 'missing')} after the undo, saved {s['version']}"
        for n, s in saved.items()
        if after.get(n) != s["version"]
    )
    _write_json(entry / MANIFEST, {**doc, "state": "undone"})
    return UndoResult(
        python=here.executable,
        undo_id=name,
        path=entry,
        restored=tuple((n, str(s["version"])) for n, s in sorted(saved.items())),
        removed=tuple((n, v) for n, v in installed if n not in saved),
        warnings=warnings,
    )
