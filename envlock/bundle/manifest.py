"""All-or-nothing bundles: a manifest, a journal and a lock file in DIR.

A bundle folder is *whole* when ``DIR/envlock-manifest.json`` (every file
envlock wrote, with its sha256) matches the files. A write goes in three
steps, under ``fcntl.flock`` on ``DIR/.envlock-lock`` (a second writer waits
for the first; the critical section is milliseconds, the slow work of a lock
happens before it):

1. every new file, the new manifest included, is written to a temp file
   beside its target (``.NAME.XXXX.envlock-tmp``) and fsynced, and every old
   file that will be replaced or removed gets a backup (a hard link, else a
   copy) beside it;
2. the journal ``DIR/.envlock-journal.json`` is written (temp + rename):
   each file's old and new sha256, its temp and its backup;
3. the temps are renamed over their targets, the files the bundle no longer
   has are removed, the manifest is renamed in last; then the journal and the
   backups are removed.

A run killed before step 2 leaves only temps and backups: the old bundle is
whole and the next run removes the leftovers. A run killed in step 3 leaves
the journal: the next run (``lock``, ``lock --check``, ``render``, ``build``)
finishes the switch from the temps, or, where that cannot be done, puts the
backups back, before it does anything else. DIR itself never moves (users
run ``envlock render .`` inside it).

A file in DIR that envlock did not write (not in the previous manifest) is
never overwritten without ``--force``; files envlock does not write are left
alone.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from envlock.bundle.guard import BundleLock, check_output_folder
from envlock.errors import EnvironmentFailure, UsageError

MANIFEST = "envlock-manifest.json"
JOURNAL = ".envlock-journal.json"
TEMP_SUFFIX = ".envlock-tmp"
MANIFEST_SCHEMA = "envlock.manifest/v1"
# a bundle folder is input (a colleague's, a pull request's): every read is bounded
FILE_LIMIT = 64 << 20  # a file of the bundle, as bundle.check reads them
STATE_LIMIT = 1 << 20  # the manifest and the journal
_HINT = "remove or replace the file, then run the command again"
JOURNAL_SCHEMA = "envlock.journal/v1"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _bytes_of(path: Path) -> bytes | None:
    from envlock.readers import read_optional

    return read_optional(path, limit=FILE_LIMIT, follow=False, hint=_HINT)


def _digest_of(path: Path) -> str | None:
    """sha256 of a regular file at ``path`` (not followed through a link); None if absent."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return "not-a-file"
    from envlock.readers import read_optional

    data = read_optional(path, limit=FILE_LIMIT, follow=False, hint=_HINT)
    return None if data is None else _sha256(data)


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _temp_name(target: Path) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TEMP_SUFFIX, dir=target.parent)
    os.close(fd)
    return Path(name)


def _write_temp(target: Path, data: bytes, mode: int) -> Path:
    tmp = _temp_name(target)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def _backup(target: Path) -> Path:
    """A second name for the old ``target`` (a hard link; a copy where links fail)."""
    tmp = _temp_name(target)
    os.unlink(tmp)
    try:
        os.link(target, tmp, follow_symlinks=False)
    except OSError:
        shutil.copy2(target, tmp, follow_symlinks=False)
    return tmp


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


# ------------------------------------------------------------------ manifest


def manifest_text(files: Mapping[str, bytes]) -> bytes:
    """The manifest of a bundle made of ``files`` (sorted, one stable text)."""
    doc = {
        "schema": MANIFEST_SCHEMA,
        "files": {
            rel: {"sha256": _sha256(data), "size": len(data)} for rel, data in sorted(files.items())
        },
    }
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode("utf-8")


def read_manifest(folder: Path) -> dict[str, str] | None:
    """``{rel: sha256}`` of DIR's manifest; None when DIR has none (exit 2 when it is bad)."""
    from envlock.readers import read_optional

    path = folder / MANIFEST
    raw = read_optional(path, limit=STATE_LIMIT, follow=False, hint=_HINT)
    if raw is None:
        return None
    try:
        doc = json.loads(raw.decode("utf-8"))
        files = doc["files"]
        if doc.get("schema") != MANIFEST_SCHEMA or not isinstance(files, dict):
            raise ValueError("not an envlock manifest")
        out: dict[str, str] = {}
        for rel, entry in files.items():
            digest = entry["sha256"]
            if not isinstance(rel, str) or not isinstance(digest, str) or len(digest) != 64:
                raise ValueError(f"bad entry {rel!r}")
            out[rel] = digest
        return out
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise UsageError(
            f"{path} is not a valid envlock manifest ({e})",
            hint="write the bundle again (`envlock lock` or `envlock render`), or delete the "
            "file and give --force",
        ) from None


def bundle_problems(folder: Path) -> list[str]:
    """Why DIR is not whole by its manifest: [] when it is (a journal or a temp
    file left behind counts as a problem)."""
    problems: list[str] = []
    if (folder / JOURNAL).exists():
        problems.append(f"{JOURNAL}: an unfinished write")
    problems += [f"{p.name}: a temp file left behind" for p in leftovers(folder)]
    try:
        manifest = read_manifest(folder)
    except UsageError as e:
        return [*problems, e.message]
    if manifest is None:
        return [*problems, f"{MANIFEST} missing"]
    for rel, digest in sorted(manifest.items()):
        got = _digest_of(folder / rel)
        if got is None:
            problems.append(f"{rel}: missing")
        elif got != digest:
            problems.append(f"{rel}: sha256 differs from the manifest")
    return problems


def _is_envlock_lock(path: Path) -> bool:
    """Whether ``path`` is an envlock pylock.toml (a bundle made before manifests)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    from envlock.errors import EnvlockError
    from envlock.readers import read_optional

    try:
        raw = read_optional(path, limit=FILE_LIMIT, hint=_HINT)
        doc = tomllib.loads(raw.decode("utf-8")) if raw is not None else {}
    except (EnvlockError, UnicodeDecodeError, ValueError):
        return False
    tool = doc.get("tool")
    return isinstance(tool, dict) and isinstance(tool.get("envlock"), dict)


def leftovers(folder: Path) -> list[Path]:
    """Temp files of envlock writes in DIR (and the subfolders its manifest names)."""
    folders = {folder}
    with contextlib.suppress(UsageError):
        for rel in read_manifest(folder) or {}:
            folders.add((folder / rel).parent)
    found: list[Path] = []
    for where in sorted(folders):
        with contextlib.suppress(OSError):
            for entry in os.scandir(where):
                if (
                    entry.name.startswith(".")
                    and entry.name.endswith(TEMP_SUFFIX)
                    and entry.is_file(follow_symlinks=False)
                ):
                    found.append(Path(entry.path))
    return sorted(found)


# ------------------------------------------------------------------ journal and recovery


@dataclass(frozen=True)
class _Entry:
    rel: str
    old: str | None  # sha256 before the switch; None: no such file
    new: str | None  # sha256 after; None: removed
    temp: str | None  # name of the new content's temp file (beside the target)
    backup: str | None  # name of the old content's backup (beside the target)


def _journal_doc(entries: list[_Entry]) -> bytes:
    doc = {
        "schema": JOURNAL_SCHEMA,
        "pid": os.getpid(),
        "entries": [e.__dict__ for e in entries],
    }
    return (json.dumps(doc, indent=2) + "\n").encode("utf-8")


def _read_journal(folder: Path) -> list[_Entry] | None:
    from envlock.readers import read_optional

    path = folder / JOURNAL
    raw = read_optional(path, limit=STATE_LIMIT, follow=False, hint=_HINT)
    if raw is None:
        return None
    try:
        doc = json.loads(raw.decode("utf-8"))
        if doc.get("schema") != JOURNAL_SCHEMA:
            raise ValueError("not an envlock journal")
        entries = [_Entry(**e) for e in doc["entries"]]
        for e in entries:
            if not isinstance(e.rel, str) or e.rel.startswith("/") or ".." in Path(e.rel).parts:
                raise ValueError(f"bad path {e.rel!r}")
        return entries
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise EnvironmentFailure(
            f"{path} is damaged ({e}); the last write to {folder} cannot be finished",
            hint=f"delete {path} and write the bundle again with `envlock lock` or "
            "`envlock render`",
        ) from None


def _side(folder: Path, entry: _Entry, name: str | None) -> Path | None:
    return None if name is None else (folder / entry.rel).parent / name


def _roll_forward(folder: Path, entries: list[_Entry]) -> bool:
    """Put every entry's new content in place; False (nothing changed) when a
    needed temp file is gone."""
    plan: list[tuple[_Entry, str]] = []
    for e in entries:
        target = folder / e.rel
        current = _digest_of(target)
        if current == e.new:
            continue
        if e.new is None:
            plan.append((e, "remove"))
            continue
        temp = _side(folder, e, e.temp)
        if temp is None or _digest_of(temp) != e.new:
            return False
        plan.append((e, "rename"))
    for e, action in plan:
        target = folder / e.rel
        if action == "remove":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)
        else:
            temp = _side(folder, e, e.temp)
            assert temp is not None
            os.replace(temp, target)
    _fsync_dir(folder)
    return True


def _roll_back(folder: Path, entries: list[_Entry]) -> bool:
    """Put every entry's old content back; False when a needed backup is gone."""
    plan: list[tuple[_Entry, str]] = []
    for e in entries:
        current = _digest_of(folder / e.rel)
        if current == e.old:
            continue
        if e.old is None:
            plan.append((e, "remove"))
            continue
        backup = _side(folder, e, e.backup)
        if backup is None or _digest_of(backup) != e.old:
            return False
        plan.append((e, "restore"))
    for e, action in reversed(plan):
        target = folder / e.rel
        if action == "remove":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)
        else:
            backup = _side(folder, e, e.backup)
            assert backup is not None
            os.replace(backup, target)
    _fsync_dir(folder)
    return True


def _remove_leftovers(folder: Path) -> int:
    count = 0
    for path in leftovers(folder):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
            count += 1
    return count


def _recover_locked(folder: Path) -> str | None:
    """With the lock held: finish or roll back an unfinished switch, then remove
    leftovers. A note for the user, or None when there was nothing to do."""
    entries = _read_journal(folder)
    note = None
    if entries is not None:
        if _roll_forward(folder, entries):
            note = f"{folder}: finished a write that was interrupted (the new bundle is in place)"
        elif _roll_back(folder, entries):
            note = f"{folder}: rolled back a write that was interrupted (the old bundle is back)"
        else:
            raise EnvironmentFailure(
                f"{folder}: a write was interrupted and neither the new nor the old files are "
                f"all there any more (see {folder / JOURNAL})",
                hint=f"write the bundle again: `envlock lock SPEC -o {folder} --force`, then "
                f"delete {JOURNAL}",
            )
        os.unlink(folder / JOURNAL)
        _fsync_dir(folder)
    removed = _remove_leftovers(folder)
    if removed and note is None:
        note = f"{folder}: removed {removed} temp file(s) left by an interrupted write"
    return note


def recover_bundle(folder: Path) -> str | None:
    """Make DIR whole again after an interrupted write (finish or roll back the
    switch, remove temp files); a note when something was done. Touches
    nothing (not even the lock file) when there is nothing to do."""
    if not folder.is_dir():
        return None
    if not (folder / JOURNAL).exists() and not leftovers(folder):
        return None
    with BundleLock(folder):
        return _recover_locked(folder)


# ------------------------------------------------------------------ the write


@dataclass(frozen=True)
class Written:
    states: dict[str, str]  # rel -> "new" | "unchanged" | "updated"
    removed: tuple[str, ...]  # files of the previous manifest the bundle no longer has
    note: str | None  # what recovery did first, if anything


@contextlib.contextmanager
def locked_bundle(folder: Path, what: str = "DIR") -> Iterator[BundleLock]:
    """Hold DIR's lock (DIR made when missing), with any unfinished write
    finished or rolled back and leftovers removed first."""
    check_output_folder(folder, what)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EnvironmentFailure(
            f"cannot make {folder}: {e.strerror or e}", hint="check the path and permissions"
        ) from e
    with BundleLock(folder) as held:
        held.note = _recover_locked(folder)
        yield held


def _mode_of(rel: str, modes: Mapping[str, int | None]) -> int:
    mode = modes.get(rel)
    return mode if mode is not None else _default_mode()


def foreign_files(folder: Path, files: Mapping[str, bytes]) -> list[str]:
    """Files of ``files`` that exist in DIR with other content and that envlock
    did not write (not in DIR's manifest; for a bundle made before manifests:
    any name when DIR's pylock.toml is not an envlock lock)."""
    manifest = read_manifest(folder)
    if manifest is None:
        legacy = _is_envlock_lock(folder / "pylock.toml")
        manifest = {rel: "" for rel in files} if legacy else {}
    out = []
    for rel, data in files.items():
        target = folder / rel
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(
                f"{target} is a folder; envlock writes a file of that name",
                hint="move the folder away or write the bundle to another folder",
            )
        if not stat.S_ISREG(st.st_mode):
            out.append(rel)  # a link, pipe or device: never written through
        elif rel not in manifest and (st.st_size != len(data) or _bytes_of(target) != data):
            out.append(rel)
    return out


def refuse_foreign(
    folder: Path, files: Mapping[str, bytes], *, force: bool, command: str = "envlock"
) -> None:
    """Exit 2 naming the files of ``files`` in DIR that envlock did not write,
    unless ``force``. ``commit`` checks again under the lock; a caller checks
    first so that a refused run leaves DIR untouched (not even a lock file)."""
    foreign = [] if force or not folder.is_dir() else foreign_files(folder, files)
    if foreign:
        names = ", ".join(str(folder / rel) for rel in foreign)
        raise UsageError(
            f"{names}: not written by envlock (not in {folder / MANIFEST}); {command} would "
            "overwrite it",
            hint="move it away, write the bundle to another folder, or give --force to "
            "overwrite it",
        )


def commit(
    folder: Path,
    files: Mapping[str, bytes],
    modes: Mapping[str, int | None] | None = None,
    *,
    force: bool = False,
    command: str = "envlock",
) -> Written:
    """Write ``files`` into DIR as one switch (the caller holds DIR's lock)."""
    modes = modes or {}
    refuse_foreign(folder, files, force=force, command=command)
    previous = read_manifest(folder) or {}
    entries: list[_Entry] = []
    states: dict[str, str] = {}
    made: list[Path] = []
    try:
        for rel, data in files.items():
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            old = _digest_of(target)
            new = _sha256(data)
            mode = _mode_of(rel, modes)
            if old == new and (
                modes.get(rel) is None or stat.S_IMODE(os.lstat(target).st_mode) == mode
            ):
                states[rel] = "unchanged"
                continue
            states[rel] = "new" if old is None else ("unchanged" if old == new else "updated")
            temp = _write_temp(target, data, mode)
            made.append(temp)
            backup = None
            if old is not None:
                backup = _backup(target)
                made.append(backup)
            entries.append(_Entry(rel, old, new, temp.name, backup.name if backup else None))
        removed = []
        for rel, digest in sorted(previous.items()):
            target = folder / rel
            if rel in files or _digest_of(target) != digest:
                continue  # still in the bundle, or changed since envlock wrote it: kept
            backup = _backup(target)
            made.append(backup)
            entries.append(_Entry(rel, digest, None, None, backup.name))
            removed.append(rel)
        manifest = manifest_text(files)
        old_manifest = _digest_of(folder / MANIFEST)
        if not entries and old_manifest == _sha256(manifest):
            for path in made:
                os.unlink(path)
            return Written(states, (), None)
        temp = _write_temp(folder / MANIFEST, manifest, 0o644)
        made.append(temp)
        backup = _backup(folder / MANIFEST) if old_manifest is not None else None
        if backup is not None:
            made.append(backup)
        entries.append(
            _Entry(
                MANIFEST,
                old_manifest,
                _sha256(manifest),
                temp.name,
                backup.name if backup else None,
            )
        )
        journal = _write_temp(folder / JOURNAL, _journal_doc(entries), 0o644)
        made.append(journal)
    except OSError as e:
        for path in made:
            with contextlib.suppress(OSError):
                os.unlink(path)
        raise EnvironmentFailure(
            f"cannot write to {folder}: {e.strerror or e}",
            hint="check that the folder is writable and the disk is not full; the bundle "
            "there is as it was",
        ) from e
    # the switch: from here on the journal says how to finish or undo it
    try:
        os.replace(journal, folder / JOURNAL)
        _fsync_dir(folder)
        _switch(folder, entries)
    except OSError as e:
        raise _failed_switch(folder, entries, e) from e
    return Written(states, tuple(removed), None)


def _switch(folder: Path, entries: list[_Entry]) -> None:
    if not _roll_forward(folder, entries):  # pragma: no cover - the temps were just made
        raise OSError(errno.ENOENT, "a temp file vanished during the write")
    os.unlink(folder / JOURNAL)
    _fsync_dir(folder)
    _remove_leftovers(folder)


def _failed_switch(folder: Path, entries: list[_Entry], error: OSError) -> EnvironmentFailure:
    """Undo a switch that failed half way (the old bundle back), else leave the
    journal for the next run; either way an exit-3 error."""
    undone = False
    with contextlib.suppress(OSError):
        if (folder / JOURNAL).exists() and _roll_back(folder, entries):
            os.unlink(folder / JOURNAL)
            _remove_leftovers(folder)
            undone = True
        elif not (folder / JOURNAL).exists():
            _remove_leftovers(folder)
            undone = True
    state = (
        "the bundle there is as it was"
        if undone
        else "the next envlock command on it finishes or undoes the write"
    )
    return EnvironmentFailure(
        f"cannot write to {folder}: {error.strerror or error}; {state}",
        hint="check that the folder is writable and the disk is not full",
    )
