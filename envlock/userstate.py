"""The user's own state: a private folder and a per-user secret.

envlock keeps two kinds of state that must not be taken from a folder other
people write (a bundle that came in a pull request, a shared project folder):

- the undo store of ``restore --in-place`` (``state_dir()/undo/``), which holds
  copies of an environment's files and says where to write them back;
- the secret that keys the MACs of envlock's own records (``captured.json``,
  the undo manifests), so a record is believed only when this user's envlock
  wrote it.

``state_dir()`` follows the XDG Base Directory specification's state home
(``$XDG_STATE_HOME``, ``~/.local/state``), as pip and uv follow its cache home;
the spec says a relative ``XDG_*`` path is invalid and must be ignored, so it
is. ``ENVLOCK_STATE_DIR`` overrides it (made absolute). ``private_dir`` makes a
folder there with mode 0700 and refuses one that is a link, another user's, or
writable by others: exit 3 naming the folder, never a write through it.

The secret is ``secret_key(folder, name)``: 32 random bytes made with
``O_EXCL`` and mode 0600, read with ``O_NOFOLLOW`` and used only while it is a
regular file of this user that nobody else may read (the matrix cache's
``cache-key`` is made the same way). ``mac`` is keyed BLAKE2b (RFC 7693: a MAC
by design), one ``person`` string per kind of record so a MAC of one kind never
passes for another.
"""

from __future__ import annotations

import os
import stat

# the built-in module: hashlib and hmac load OpenSSL, a few ms of every start
try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python without the built-in module
    from hashlib import blake2b
from _operator import _compare_digest as compare_digest  # what hmac.compare_digest is

from envlock.errors import EnvironmentFailure

KEY_BYTES = 32
MAC_BYTES = 32
KEY_NAME = "key"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def state_dir() -> str:
    """$ENVLOCK_STATE_DIR, else $XDG_STATE_HOME/envlock (when absolute), else
    ~/.local/state/envlock."""
    explicit = os.environ.get("ENVLOCK_STATE_DIR")
    if explicit:
        return os.path.abspath(explicit)
    base = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(base):  # unset, empty or relative: the spec's default
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "envlock")


def own_private_file(st: os.stat_result) -> bool:
    """A regular file of this user that nobody else may read or write."""
    uid = getattr(os, "geteuid", None)
    return (
        stat.S_ISREG(st.st_mode)
        and (uid is None or st.st_uid == uid())
        and not st.st_mode & (stat.S_IRWXG | stat.S_IRWXO)
    )


def _own_folder(st: os.stat_result) -> bool:
    uid = getattr(os, "geteuid", None)
    return (
        stat.S_ISDIR(st.st_mode)
        and (uid is None or st.st_uid == uid())
        and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def private_dir(path: str) -> str:
    """``path``, made (mode 0700, parents as needed) when absent; an
    EnvironmentFailure (exit 3) when it is a link, not a folder, another user's
    or writable by others, or cannot be made."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError as e:
        raise EnvironmentFailure(
            f"cannot make envlock's state folder {path}: {e.strerror or e}",
            hint="check that the folder is writable and the disk is not full, "
            "or point ENVLOCK_STATE_DIR at a folder of your own",
        ) from None
    if not _own_folder(st):
        why = (
            "a link"
            if stat.S_ISLNK(st.st_mode)
            else "not a folder"
            if not stat.S_ISDIR(st.st_mode)
            else "another user's"
            if st.st_uid != os.geteuid()
            else "writable by others"
        )
        raise EnvironmentFailure(
            f"envlock's state folder {path} is {why}: envlock keeps undo copies and its "
            "key there, so it must be your own, private folder",
            hint="remove it (envlock makes it again) or point ENVLOCK_STATE_DIR at a "
            "folder of your own",
        )
    return path


def secret_key(folder: str, name: str = KEY_NAME) -> bytes | None:
    """The per-user secret ``folder/name``, created (``O_EXCL``, mode 0600) when
    absent. None when it cannot be made or read, or is not this user's private
    regular file (a link, another owner, readable by others): then nothing keyed
    by it is believed. A key of another length (a run killed while writing it)
    is made again."""
    path = os.path.join(folder, name)
    for _ in range(3):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC)
        except FileNotFoundError:
            try:
                os.makedirs(folder, mode=0o700, exist_ok=True)
                fd = os.open(
                    path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600
                )
            except FileExistsError:
                continue  # another run made it first: read that one
            except OSError:
                return None
            key = os.urandom(KEY_BYTES)
            try:
                written = os.write(fd, key)
            except OSError:
                written = 0
            finally:
                os.close(fd)
            return key if written == KEY_BYTES else None
        except OSError:
            return None  # a link (ELOOP), unreadable, ...
        try:
            st = os.fstat(fd)
            key = os.read(fd, KEY_BYTES + 1) if own_private_file(st) else b""
        except OSError:
            return None
        finally:
            os.close(fd)
        if not own_private_file(st):
            return None
        if len(key) == KEY_BYTES:
            return key
        try:
            os.unlink(path)  # ours, private, damaged: make another
        except OSError:
            return None
    return None


def user_key() -> bytes | None:
    """This user's secret for envlock's records (``state_dir()/key``)."""
    return secret_key(state_dir())


def mac(key: bytes, body: bytes, person: bytes) -> str:
    """Keyed BLAKE2b-256 of ``body`` as hex; ``person`` (at most 16 bytes) names
    the kind of record."""
    return blake2b(body, key=key, digest_size=MAC_BYTES, person=person).hexdigest()


def mac_matches(key: bytes, body: bytes, person: bytes, given: object) -> bool:
    """Whether ``given`` is ``mac(key, body, person)`` (compared in constant time)."""
    if not isinstance(given, str) or len(given) != 2 * MAC_BYTES or not given.isascii():
        return False
    return compare_digest(given, mac(key, body, person))
