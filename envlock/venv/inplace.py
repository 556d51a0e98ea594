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
distributions' RECORDs is copied into the undo store. The store is the user's
own (``envlock.userstate``: ``~/.local/state/envlock/undo/<environment>/<id>/``,
mode 0700), never the bundle folder: a bundle is input (a colleague's, a pull
request's) and often shared, so it must neither say what gets written back
nor receive copies of an environment's files. ``files/`` holds the copies
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

import hashlib
import json
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

from envlock import userstate
from envlock.errors import EnvironmentFailure, UsageError
from envlock.readers import shown

if TYPE_CHECKING:
    from envlock.venv.install import RestoreRequest
    from envlock.model import Lock

OLD_UNDO_DIR = ".envlock-undo"  # inside the bundle, before envlock.undo/v2: never read
UNDO_SCHEMA = "envlock.undo/v2"
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 64 * 1024 * 1024  # a TensorFlow's closure: a few MB
_PERSON = b"envlock-undo"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# never removed as extras: the interpreter's own installers (pip-sync keeps them too)
KEEP = frozenset({"pip", "setuptools", "wheel", "distribute"})

_PROBE = r"""
import json, os, re, site, sys, sysconfig
from importlib import metadata
want = set(json.loads(sys.argv[1]))
roots = {sys.prefix, sys.exec_prefix}
paths = sysconfig.get_paths()
roots.update(paths[k] for k in ("data", "purelib", "platlib", "scripts") if paths.get(k))
if getattr(site, "ENABLE_USER_SITE", False) and getattr(site, "USER_BASE", None):
    roots.add(site.USER_BASE)
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
                  "roots": sorted(os.path.abspath(r) for r in roots),
                  "minor": "%d.%d" % sys.version_info[:2], "dists": out}))
"""


@dataclass(frozen=True)
class Installed:
    executable: str
    prefix: str
    minor: str
    versions: dict[str, str]
    files: dict[str, list[str] | None]  # for the names asked for
    # where the environment may have files: its prefixes and install-scheme
    # folders (and the user site where enabled), as the interpreter says
    roots: tuple[str, ...] = ()

    def inside(self, path: str) -> bool:
        """``path`` (absolute, normalized) lies in the environment: the folder it
        is in, resolved through links, is inside one of ``roots`` (resolved too)."""
        if not os.path.isabs(path) or os.path.normpath(path) != path or "\0" in path:
            return False
        folder = os.path.realpath(os.path.dirname(path))
        for root in self.roots:
            real = os.path.realpath(root)
            if folder == real or folder.startswith(real.rstrip(os.sep) + os.sep):
                return True
        return False


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
        roots=tuple(str(r) for r in doc.get("roots") or (doc["prefix"],)),
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


def store(prefix: str) -> Path:
    """The undo store of the environment at ``prefix``: a folder of the user's own
    state (``envlock.userstate``), named by a digest of the prefix resolved."""
    key = hashlib.blake2b(os.path.realpath(prefix).encode(), digest_size=8).hexdigest()
    return Path(userstate.state_dir()) / "undo" / key


def _private_store(prefix: str) -> Path:
    top = store(prefix)
    userstate.private_dir(userstate.state_dir())
    userstate.private_dir(str(top))
    return top


def _new_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


class SavedFile(TypedDict):
    path: str  # absolute, inside the environment
    kind: str  # "file" (copied as files/<index>) or "link"
    index: int  # -1 for a link
    sha256: str  # of the copy ("" for a link)
    target: str  # where the link points ("" for a file)
    mode: int  # permission bits of the file
    mtime_ns: int


class SavedDist(TypedDict):
    name: str
    version: str
    files: list[SavedFile]  # their RECORD paths that were there, in order: files/<n>


class UndoEntry(TypedDict, total=False):
    """An undo entry's manifest (schema UNDO_SCHEMA): what an in-place restore changed
    and saved, and how far it got (state: saved, applied, undone); ``mac`` over the
    rest, keyed by the user's secret."""

    schema: str
    created: str
    python: str
    executable: str
    prefix: str
    bundle: str
    exact: bool
    installed: list[list[str]]  # [name, version] put in
    removed: list[list[str]]  # [name, version] taken out (--exact)
    id: str
    saved: list[SavedDist]
    state: str
    mac: str


def _body(doc: UndoEntry) -> bytes:
    plain = {k: v for k, v in doc.items() if k != "mac"}
    return json.dumps(plain, sort_keys=True, separators=(",", ":")).encode()


def _write_json(path: Path, doc: UndoEntry) -> None:
    """The manifest, with its MAC, replacing ``path`` by a rename."""
    key = userstate.user_key()
    if key is None:
        raise EnvironmentFailure(
            f"cannot read or make envlock's key in {userstate.state_dir()}",
            hint="check that the folder is yours and writable, or point ENVLOCK_STATE_DIR "
            "at a folder of your own",
        )
    signed: UndoEntry = {**doc, "mac": userstate.mac(key, _body(doc), _PERSON)}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(signed, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _file_of(index: int) -> str:
    return f"files/{index}"


def _classify(inst: Installed, name: str, path: str, fix: str) -> str | None:
    """ "file", "link" or None (gone, or a folder) for a RECORD path of ``name``;
    a UsageError (with the hint ``fix``) for a path outside the environment or a
    special file."""
    if not inst.inside(path):
        raise UsageError(
            f"{name} in {inst.executable}: its RECORD names {shown(path)}, outside the "
            f"environment ({inst.prefix}), so its files are not saved for --undo; nothing "
            "was changed",
            hint=fix,
        )
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None  # a RECORD line for a file already gone
    except OSError as e:
        raise EnvironmentFailure(
            f"cannot read {shown(path)} of {name} to save it for --undo: {e.strerror or e}; "
            "nothing was changed",
            hint="check its permissions",
        ) from None
    if stat.S_ISLNK(st.st_mode):
        return "link"
    if stat.S_ISDIR(st.st_mode):
        return None
    if stat.S_ISREG(st.st_mode):
        return "file"
    raise UsageError(
        f"{name} in {inst.executable}: its RECORD names {shown(path)}, which is not a "
        "regular file or a link (a FIFO, a device or a socket), so it is not saved for "
        "--undo; nothing was changed",
        hint=fix,
    )


def _copy_out(path: str, dest: Path) -> tuple[str, int, int]:
    """Copy the regular file ``path`` (not through a link) to the new file ``dest``;
    its (sha256, mode bits, mtime_ns)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path} is no longer a regular file")
        h = hashlib.sha256()
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600)
        try:
            while chunk := os.read(fd, 1 << 20):
                h.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view) :]
        finally:
            os.close(out)
    finally:
        os.close(fd)
    return h.hexdigest(), stat.S_IMODE(st.st_mode), st.st_mtime_ns


def save(
    inst: Installed, names: list[tuple[str, str]], doc: UndoEntry, fix: str
) -> tuple[str, Path]:
    """Copy every RECORD file of ``names`` into a new undo entry of ``inst``'s
    environment; (id, its folder). Every path is checked first (inside the
    environment, a regular file or a link): a bad one is a UsageError and
    nothing is saved. A failed copy (a full disk) is an EnvironmentFailure."""
    todo: list[tuple[str, str, list[tuple[str, str]]]] = []
    for name, version in names:
        kinds = [(path, _classify(inst, name, path, fix)) for path in inst.files.get(name) or []]
        todo.append((name, version, [(p, k) for p, k in kinds if k is not None]))
    top = _private_store(inst.prefix)
    uid = _new_id()
    tmp = top / f".tmp-{uid}"
    saved: list[SavedDist] = []
    current = str(tmp)
    try:
        (tmp / "files").mkdir(parents=True)
        n = 0
        for name, version, paths in todo:
            kept: list[SavedFile] = []
            for path, kind in paths:
                current = path
                f = SavedFile(
                    path=path, kind=kind, index=-1, sha256="", target="", mode=0, mtime_ns=0
                )
                if kind == "link":
                    f["target"] = os.readlink(path)
                else:
                    digest, mode, mtime = _copy_out(path, tmp / _file_of(n))
                    f["index"], f["sha256"], f["mode"], f["mtime_ns"] = n, digest, mode, mtime
                    n += 1
                kept.append(f)
            saved.append({"name": name, "version": version, "files": kept})
        current = str(tmp / MANIFEST)
        _write_json(tmp / MANIFEST, {**doc, "id": uid, "saved": saved, "state": "saved"})
        os.rename(tmp, top / uid)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise EnvironmentFailure(
            f"cannot save {shown(current)} for --undo into {top}: {e.strerror or e}; "
            "nothing was changed",
            hint=f"free space on the disk of {top} (df -h {shlex.quote(str(top))}), then run "
            "the restore again",
        ) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return uid, top / uid


def _valid(doc: object, key: bytes | None) -> UndoEntry | None:
    """``doc`` as an undo manifest when it is one this user's envlock wrote (its MAC
    matches) and of the expected shape; else None."""
    if not isinstance(doc, dict) or doc.get("schema") != UNDO_SCHEMA or key is None:
        return None
    if not userstate.mac_matches(key, _body(cast(UndoEntry, doc)), _PERSON, doc.get("mac")):
        return None
    strings = ("executable", "prefix", "bundle", "state", "id")
    if not all(isinstance(doc.get(k), str) for k in strings):
        return None
    for dist in doc.get("saved") or []:
        if not isinstance(dist, dict) or not isinstance(dist.get("files"), list):
            return None
        for f in dist["files"]:
            if not isinstance(f, dict) or f.get("kind") not in ("file", "link"):
                return None
            if not all(isinstance(f.get(k), str) for k in ("path", "sha256", "target")):
                return None
            if not all(type(f.get(k)) is int for k in ("index", "mode", "mtime_ns")):
                return None
    for pair in [*(doc.get("installed") or []), *(doc.get("removed") or [])]:
        if not (
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
        ):
            return None
    return cast(UndoEntry, doc)


def _entries(prefix: str) -> tuple[list[tuple[str, Path, UndoEntry]], list[Path]]:
    """The undo entries of the environment at ``prefix``, oldest first, and the
    folders there that are not valid entries (damaged, or not this user's)."""
    from envlock.readers import parse_json, read_bytes

    top = store(prefix)
    out, bad = [], []
    if not top.is_dir():
        return [], []
    userstate.private_dir(str(top))
    key = userstate.user_key()
    for entry in sorted(top.iterdir()):
        if entry.name.startswith("."):
            continue
        try:
            data = read_bytes(entry / MANIFEST, limit=MAX_MANIFEST_BYTES)
            doc = _valid(parse_json(data, str(entry / MANIFEST), limit=MAX_MANIFEST_BYTES), key)
        except UsageError:
            doc = None
        if doc is None or doc.get("id") != entry.name:
            bad.append(entry)
        else:
            out.append((entry.name, entry, doc))
    return out, bad


def _put_back(here: Installed, entry: Path, f: SavedFile) -> None:
    """Write one saved file (or link) back at its path, never through a link."""
    path = f["path"]
    parent = os.path.dirname(path)
    for _ in range(2):  # before the folders are made (through no link leading out), and after
        if not here.inside(path):
            raise OSError(f"{parent} leads outside the environment")
        os.makedirs(parent, exist_ok=True)
    if os.path.lexists(path):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    if f["kind"] == "link":
        os.symlink(f["target"], path)
        return
    src = os.open(entry / _file_of(f["index"]), os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
    try:
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600)
        try:
            while chunk := os.read(src, 1 << 20):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view) :]
            os.fchmod(out, f["mode"] & 0o777)
        finally:
            os.close(out)
    finally:
        os.close(src)
    os.utime(path, ns=(f["mtime_ns"], f["mtime_ns"]), follow_symlinks=False)


# ----------------------------------------------------------------- uv


def _uv(argv: list[str], doing: str, offline: bool = False) -> None:
    from envlock.venv.install import INSTALL_TIMEOUT, run_step
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


def _fix(req: RestoreRequest) -> str:
    return (
        "build a new venv instead (the old one stays as it is): envlock restore "
        f"{shlex.quote(str(req.bundle))} --venv NEW_VENV_PATH"
    )


def sync(req: RestoreRequest, lock: Lock, python: str, say: Callable[[str], None]) -> InPlaceResult:
    """Install what the lock has and ``python`` lacks (or has at another version);
    with ``req.exact`` remove what the lock does not name; undo saved first."""
    from envlock.venv.install import install_argv

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
    _write_json(entry / MANIFEST, {**_read_entry(entry), "state": "applied"})
    return InPlaceResult(before.executable, p, uid, entry, len(lock.packages))


def _read_entry(entry: Path) -> UndoEntry:
    """The manifest of an entry this run made or chose (checked again)."""
    from envlock.readers import read_json

    doc = _valid(read_json(entry / MANIFEST, limit=MAX_MANIFEST_BYTES), userstate.user_key())
    if doc is None:
        raise EnvironmentFailure(
            f"{entry / MANIFEST} changed under envlock (its MAC no longer matches)",
            hint=f"look at what else writes {userstate.state_dir()}",
        )
    return doc


def _sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
    finally:
        os.close(fd)
    return h.hexdigest()


def undo(req: RestoreRequest, python: str, uid: str | None) -> UndoResult:
    """Put back what the newest (or ``uid``) in-place sync of ``python`` from this
    bundle replaced or removed, and take out what it installed; offline."""
    here = probe(python)
    top = store(here.prefix)
    entries, bad = _entries(here.prefix)
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
    for f in files:
        if not here.inside(f["path"]):
            raise UsageError(
                f"undo {name} names {shown(f['path'])}, outside the environment of "
                f"{here.executable} ({here.prefix}); nothing was undone",
                hint=f"remove that entry: rm -r {shlex.quote(str(entry))}",
            )
        if f["kind"] == "file" and _sha256_of(entry / _file_of(f["index"])) != f["sha256"]:
            raise EnvironmentFailure(
                f"undo {name}: the saved copy of {shown(f['path'])} does not match its "
                "sha256; nothing was undone",
                hint=f"the store was damaged; remove that entry: rm -r {shlex.quote(str(entry))}",
            )
    installed = [(str(n), str(v)) for n, v in doc.get("installed", [])]
    out = sorted({n for n, _ in installed} | set(saved))
    _uninstall(python, [n for n in out if n in here.versions], offline=True)
    current = ""
    try:
        for f in files:
            current = f["path"]
            _put_back(here, entry, f)
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
    _write_json(entry / MANIFEST, {**doc, "state": "undone"})
    return UndoResult(
        python=here.executable,
        undo_id=name,
        path=entry,
        restored=tuple((n, str(s["version"])) for n, s in sorted(saved.items())),
        removed=tuple((n, v) for n, v in installed if n not in saved),
        warnings=warnings,
    )
