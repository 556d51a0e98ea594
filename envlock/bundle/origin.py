"""Where a bundle was captured: ``DIR/captured.json``.

``envlock capture`` writes it after the bundle itself, beside the manifest
but not in it (the lock and the files rendered from it do not depend on where
the environment lived, so ``lock --check`` and a re-lock leave it alone). It
names the interpreter that was inspected, its venv (None for a system or
``--user`` interpreter), the Python and platform, and a keyed digest of the
machine (hostname and ``/etc/machine-id``) that tells this machine from another
without naming it. doctor and restore read it: on the machine it came from,
the captured environment is their default target, so a fix that names the
bundle acts on the environment that was captured, not on a new ``DIR/.venv``.

The machine digest is not a secret (any local user computes it), and a
bundle folder is input (a colleague's, a pull request's). So the file carries
a MAC (``mac``: keyed BLAKE2b over the other fields, keyed by this user's
secret, ``envlock.userstate``), and it is a default only when that MAC
matches: written by this user's envlock, on this machine. Any other
captured.json (forged, edited, a colleague's, from before the MAC) is read as
a hint that is shown (``ignored``), never acted on.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from envlock import userstate
from envlock.errors import UsageError
from envlock.fsutil import atomic_write
from envlock.readers import read_bytes, shown

FILE = "captured.json"
SCHEMA = 1
MAX_BYTES = 64 * 1024  # today's: ~300 bytes
_PERSON = b"envlock-captured"
_FIELDS = ("interpreter", "venv", "python", "platform", "machine")


def machine_id() -> str:
    """16 hex digits that are the same on every run on this machine."""
    try:
        mid = Path("/etc/machine-id").read_text(encoding="utf-8").strip()
    except OSError:
        mid = ""
    seed = f"{socket.gethostname()}\n{mid}".encode()
    return hashlib.blake2b(seed, digest_size=8, person=b"envlock-origin").hexdigest()


class _OriginBase(TypedDict):
    schema: int
    interpreter: str
    venv: str | None
    python: str
    platform: str
    machine: str


class OriginDict(_OriginBase, total=False):
    """captured.json: ``mac`` where this user's key could be made."""

    mac: str


@dataclass(frozen=True)
class Origin:
    interpreter: str  # the interpreter inspected, absolute, as given (a venv's link kept)
    venv: str | None  # its venv folder; None for a system or --user interpreter
    python: str  # "3.11.7"
    platform: str  # "Linux x86_64, glibc 2.36"
    machine: str  # machine_id() where it was captured
    # read with a MAC that matches this user's key (``read`` sets it)
    verified: bool = field(default=False, compare=False)

    def here(self) -> bool:
        """Written by this user's envlock on this machine (its MAC matches), so the
        paths it names may be acted on."""
        return self.verified and self.machine == machine_id()

    @property
    def target(self) -> str:
        """What ``--venv`` names: the venv folder, else the interpreter itself."""
        return self.venv or self.interpreter

    def to_dict(self) -> OriginDict:
        return OriginDict(
            schema=SCHEMA,
            interpreter=self.interpreter,
            venv=self.venv,
            python=self.python,
            platform=self.platform,
            machine=self.machine,
        )


def from_probe(doc: Mapping[str, object], interpreter: str, venv: str | None) -> Origin:
    """The origin of a capture, from doctor's probe document of its interpreter
    (``envlock.venv.probe.ProbeDoc``; read here as plain JSON, this layer stands
    below doctor)."""
    markers = _object(doc.get("markers"))
    python = _object(doc.get("python"))
    libc_parts = python.get("libc")
    libc = [str(p) for p in libc_parts if p] if isinstance(libc_parts, list) else []
    platform = " ".join(
        str(markers.get(k, "")) for k in ("platform_system", "platform_machine") if markers.get(k)
    )
    if libc:
        platform += f", {' '.join(libc)}"
    return Origin(
        interpreter=interpreter,
        venv=venv,
        python=str(python.get("version", "")),
        platform=platform,
        machine=machine_id(),
    )


def _object(value: object) -> Mapping[str, object]:
    """A JSON object, or an empty one for anything else (absent, null)."""
    return value if isinstance(value, dict) else {}


def _signed_body(doc: Mapping[str, object]) -> bytes:
    """What the MAC covers: the schema and every field, as canonical JSON."""
    plain = {k: doc.get(k) for k in ("schema", *_FIELDS)}
    return json.dumps(plain, sort_keys=True, separators=(",", ":")).encode()


def write(folder: Path, origin: Origin) -> None:
    """captured.json with this user's MAC (without one where no key can be made:
    then it is only ever a hint)."""
    doc = origin.to_dict()
    key = userstate.user_key()
    if key is not None:
        doc["mac"] = userstate.mac(key, _signed_body(doc), _PERSON)
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    atomic_write(folder / FILE, text)


def read(folder: Path) -> Origin | None:
    """The bundle's origin; None when it has none (a bundle ``lock`` made).
    ``verified`` says whether its MAC matches this user's key."""
    path = folder / FILE
    hint = f"remove {shlex.quote(str(path))} (the bundle works without it) or capture again"
    if not os.path.lexists(path):
        return None
    data = read_bytes(path, "", limit=MAX_BYTES, hint=hint)
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise UsageError(
            f"{path}: not readable as envlock's captured.json ({e})", hint=hint
        ) from None
    if (
        not isinstance(doc, dict)
        or doc.get("schema") != SCHEMA
        or not all(isinstance(doc.get(k), str) for k in _FIELDS if k != "venv")
        or not isinstance(doc.get("venv"), (str, type(None)))
        or not isinstance(doc.get("mac", ""), str)
    ):
        raise UsageError(f"{path}: not envlock's captured.json (schema {SCHEMA})", hint=hint)
    key = userstate.user_key()
    verified = key is not None and userstate.mac_matches(
        key, _signed_body(doc), _PERSON, doc.get("mac")
    )
    return Origin(**{k: doc[k] for k in _FIELDS}, verified=verified)


def ignored(folder: Path, found: Origin | None) -> str | None:
    """Why DIR/captured.json, when there is one, is not the default target: a
    note for people naming what it says and how to act on it on purpose; None
    when there is none or it is trusted (``Origin.here``)."""
    if found is None or found.here():
        return None
    if not found.verified:
        why = "this user's envlock did not write it here (its MAC does not match)"
    else:
        why = "it was captured on another machine"
    return (
        f"{folder / FILE} names {shown(found.target)}, but {why}, so it is not used; "
        f"to act on that environment, pass --venv {shown(shlex.quote(found.target))}"
    )
