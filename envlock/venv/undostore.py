"""The undo store of ``restore --in-place``: the user's own, never the bundle's.

Before an in-place sync replaces or removes anything, every file of the affected
distributions' RECORDs is saved here: ``~/.local/state/envlock/undo/<environment>/<id>/``
(``envlock.userstate``; mode 0700). ``files/`` holds them (numbered: a hard link
where the store and the environment share a file system, else a copy; _save_out),
``manifest.json`` says what was saved (path, kind, sha256, mode) and what the
sync installs, under a MAC keyed by the user's secret. An entry is filled under
a temp name (``.tmp-<id>``) and renamed into place when complete.

A RECORD is the environment's own text, so each path is checked before
anything is copied (``Installed.inside``, a regular file or a link); written
back, a path is checked again against the live environment, a copy only when
its sha256 matches, never through a link. ``envlock.venv.inplace`` drives it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import stat
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

from envlock import userstate
from envlock.errors import EnvironmentFailure, UsageError
from envlock.readers import shown

if TYPE_CHECKING:
    from envlock.venv.installed import Installed

UNDO_SCHEMA = "envlock.undo/v2"
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 64 * 1024 * 1024  # a TensorFlow's closure: a few MB
_PERSON = b"envlock-undo"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def store(prefix: str) -> Path:
    """The undo store of the environment at ``prefix``: a folder of the user's own
    state (``envlock.userstate``), named by a digest of the prefix resolved."""
    key = hashlib.blake2b(os.path.realpath(prefix).encode(), digest_size=8).hexdigest()
    return Path(userstate.state_dir()) / "undo" / key


def private_store(prefix: str) -> Path:
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


def write_json(path: Path, doc: UndoEntry) -> None:
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
    # one line: json's C encoder (indent= takes its Python one, 2.6 s of an in-place
    # restore of TensorFlow's 26,646 files against 0.2 s)
    tmp.write_text(json.dumps(signed) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def file_of(index: int) -> str:
    return f"files/{index}"


def _classify(
    inst: Installed, name: str, path: str, fix: str, memo: dict[str, bool]
) -> str | None:
    """ "file", "link" or None (gone, or a folder) for a RECORD path of ``name``;
    a UsageError (with the hint ``fix``) for a path outside the environment or a
    special file. ``memo``: Installed.inside's, for the one pass over the paths."""
    if not inst.inside(path, memo):
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


def _save_out(path: str, dest: Path) -> tuple[str, int, int]:
    """Save the regular file ``path`` (not through a link) as the new file ``dest``;
    its (sha256, mode bits, mtime_ns).

    A hard link where the store and the environment share a file system, else a
    copy (another file system, one without hard links, a link the kernel refuses:
    fs.protected_hardlinks). A link keeps the old bytes because nothing writes into
    an installed file: the sync replaces a distribution by removing its files and
    writing new ones (uv and pip unlink a path before they write it, as put_back
    does), so the saved inode is left to the store. TensorFlow's 26,646 files
    (1.8 GB) are then saved without 1.8 GB of writes (BENCHMARKS.md). The sha256 is
    of what ``dest`` holds, read through ``dest`` where it is a link: a write into
    the shared file before the sync replaced it is caught by undo's check of every
    saved file."""
    try:
        os.link(path, dest, follow_symlinks=False)
        linked = True
    except (OSError, NotImplementedError):  # the latter: no linkat on this platform
        linked = False
    # a link, a FIFO or a device (the path changed since it was classified) fails
    # here: O_NOFOLLOW refuses a link, fstat names the rest
    fd = os.open(dest if linked else path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path} is no longer a regular file")
        h = hashlib.sha256()
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
        out = -1 if linked else os.open(dest, flags, 0o600)
        try:
            while chunk := os.read(fd, 1 << 20):
                h.update(chunk)
                view = memoryview(chunk)
                while out >= 0 and view:
                    view = view[os.write(out, view) :]
        finally:
            if out >= 0:
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
    memo: dict[str, bool] = {}
    for name, version in names:
        recorded = inst.files.get(name) or []
        kinds = [(path, _classify(inst, name, path, fix, memo)) for path in recorded]
        todo.append((name, version, [(p, k) for p, k in kinds if k is not None]))
    top = private_store(inst.prefix)
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
                    digest, mode, mtime = _save_out(path, tmp / file_of(n))
                    f["index"], f["sha256"], f["mode"], f["mtime_ns"] = n, digest, mode, mtime
                    n += 1
                kept.append(f)
            saved.append({"name": name, "version": version, "files": kept})
        current = str(tmp / MANIFEST)
        write_json(tmp / MANIFEST, {**doc, "id": uid, "saved": saved, "state": "saved"})
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


def valid(doc: object, key: bytes | None) -> UndoEntry | None:
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


def read_entries(prefix: str) -> tuple[list[tuple[str, Path, UndoEntry]], list[Path]]:
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
            doc = valid(parse_json(data, str(entry / MANIFEST), limit=MAX_MANIFEST_BYTES), key)
        except UsageError:
            doc = None
        if doc is None or doc.get("id") != entry.name:
            bad.append(entry)
        else:
            out.append((entry.name, entry, doc))
    return out, bad


def put_back(here: Installed, entry: Path, f: SavedFile, made: set[str] | None = None) -> None:
    """Write one saved file (or link) back at its path, never through a link.
    ``made``: the folders this pass has already checked and made (one set for
    the pass): each folder is checked before it is made and after, once."""
    path = f["path"]
    parent = os.path.dirname(path)
    if made is None or parent not in made:
        for _ in range(2):  # before the folders are made (through no link leading out), and after
            if not here.inside(path):
                raise OSError(f"{parent} leads outside the environment")
            os.makedirs(parent, exist_ok=True)
        if made is not None:
            made.add(parent)
    if os.path.lexists(path):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
            if made is not None:
                made.clear()  # folders checked before may be gone
        else:
            os.unlink(path)
    if f["kind"] == "link":
        if made is not None:
            # what lies under a link is checked again, through it (the folder
            # it replaces was cleared above; this also covers one removed since)
            made.clear()
        os.symlink(f["target"], path)
        return
    saved = entry / file_of(f["index"])
    try:
        # the entry is spent once undone (undo takes only saved or applied ones):
        # its file becomes the live one, as a hard link where both share a file system
        os.link(saved, path, follow_symlinks=False)
    except (OSError, NotImplementedError):
        _copy_back(saved, path, f["mode"])
    else:
        out = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
        try:
            os.fchmod(out, f["mode"] & 0o777)
        finally:
            os.close(out)
    os.utime(path, ns=(f["mtime_ns"], f["mtime_ns"]), follow_symlinks=False)


def _copy_back(saved: Path, path: str, mode: int) -> None:
    src = os.open(saved, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
    try:
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600)
        try:
            while chunk := os.read(src, 1 << 20):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view) :]
            os.fchmod(out, mode & 0o777)
        finally:
            os.close(out)
    finally:
        os.close(src)


def read_entry(entry: Path) -> UndoEntry:
    """The manifest of an entry this run made or chose (checked again)."""
    from envlock.readers import read_json

    doc = valid(read_json(entry / MANIFEST, limit=MAX_MANIFEST_BYTES), userstate.user_key())
    if doc is None:
        raise EnvironmentFailure(
            f"{entry / MANIFEST} changed under envlock (its MAC no longer matches)",
            hint=f"look at what else writes {userstate.state_dir()}",
        )
    return doc


def sha256_of(path: Path) -> str:
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
