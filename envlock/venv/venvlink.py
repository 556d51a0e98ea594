"""The venv path as a link to versioned folders (``PATH -> PATH.envlock-N``):
finding them, the switch journal, the lock against a second restore, and the
recovery of what a killed restore left (``envlock.venv.restore`` explains
the switch)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from envlock.errors import EnvironmentFailure

SUFFIX = ".envlock-"
_VERSIONED = re.compile(r"\.envlock-(\d+)$")


def versioned(venv: Path) -> list[tuple[int, Path]]:
    out = []
    parent = venv.parent
    if parent.is_dir():
        prefix = venv.name + SUFFIX
        for entry in parent.iterdir():
            if entry.name.startswith(prefix):
                m = _VERSIONED.search(entry.name)
                if m and entry.name == f"{prefix}{m.group(1)}":
                    out.append((int(m.group(1)), entry))
    return sorted(out)


def journal_path(venv: Path) -> Path:
    return venv.parent / f"{venv.name}{SUFFIX}switch"


MAX_JOURNAL = 64 * 1024  # {"to": "NAME.envlock-N"}


def read_journal(venv: Path) -> bytes | None:
    """The switch journal's bytes; None when there is none. One that is there but
    cannot be read (a FIFO, a device, a link, over 64 KiB, no permission) is exit
    3 naming it, and it is left where it is: dropping it could leave the venv
    path missing for good (issue #38: absent is not unreadable)."""
    from envlock.readers import read_optional

    path = journal_path(venv)
    return read_optional(
        path,
        "restore's switch journal",
        limit=MAX_JOURNAL,
        follow=False,
        error=EnvironmentFailure,
        hint=f"look at it; when {venv} is as it should be, remove it: rm {path}",
    )


def temp_link(venv: Path) -> Path:
    return venv.parent / f"{venv.name}{SUFFIX}link-{os.getpid()}"


def current_folder(venv: Path) -> Path | None:
    """The versioned folder ``venv`` links to; None when it is no envlock link."""
    if not venv.is_symlink():
        return None
    target = os.readlink(venv)
    folder = venv.parent / target
    if _VERSIONED.search(target) and os.sep not in target:
        return folder
    return None


@contextmanager
def locked(venv: Path) -> Iterator[None]:
    path = venv.parent / f"{venv.name}{SUFFIX}lock"
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise EnvironmentFailure(
                f"another envlock restore is working on {venv}",
                hint="wait for it to finish, then run restore again",
            ) from None
        yield


def recover(venv: Path) -> list[str]:
    """Finish an interrupted switch and remove what killed restores left; what was done."""
    done: list[str] = []
    journal = journal_path(venv)
    raw = read_journal(venv)
    if raw is not None:
        try:
            data = json.loads(raw.decode("utf-8"))
            target = str(data["to"])
        except (ValueError, KeyError, TypeError):
            target = ""  # cut short by a kill while it was written: the switch never began
        if target and not os.path.lexists(venv) and (venv.parent / target).is_dir():
            link = temp_link(venv)
            link.unlink(missing_ok=True)
            os.symlink(target, link)
            os.replace(link, venv)
            done.append(f"finished an interrupted switch: {venv} -> {target}")
        journal.unlink(missing_ok=True)
    for entry in list(venv.parent.iterdir()) if venv.parent.is_dir() else []:
        if entry.name.startswith(f"{venv.name}{SUFFIX}link-") and entry.is_symlink():
            entry.unlink()
            done.append(f"removed {entry.name}")
    return done


def clean_old(venv: Path, keep: set[Path]) -> list[str]:
    removed = []
    for _, folder in versioned(venv):
        if folder not in keep and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder.name)
    return removed
