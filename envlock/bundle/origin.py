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
"""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from envlock.errors import UsageError
from envlock.fsutil import atomic_write

FILE = "captured.json"
SCHEMA = 1


def machine_id() -> str:
    """16 hex digits that are the same on every run on this machine."""
    try:
        mid = Path("/etc/machine-id").read_text(encoding="utf-8").strip()
    except OSError:
        mid = ""
    seed = f"{socket.gethostname()}\n{mid}".encode()
    return hashlib.blake2b(seed, digest_size=8, person=b"envlock-origin").hexdigest()


class OriginDict(TypedDict):
    """captured.json."""

    schema: int
    interpreter: str
    venv: str | None
    python: str
    platform: str
    machine: str


@dataclass(frozen=True)
class Origin:
    interpreter: str  # the interpreter inspected, absolute, as given (a venv's link kept)
    venv: str | None  # its venv folder; None for a system or --user interpreter
    python: str  # "3.11.7"
    platform: str  # "Linux x86_64, glibc 2.36"
    machine: str  # machine_id() where it was captured

    def here(self) -> bool:
        """Captured on this machine (the paths it names mean the same here)."""
        return self.machine == machine_id()

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
    (``envlock.doctor.probe.ProbeDoc``; read here as plain JSON, this layer stands
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


def write(folder: Path, origin: Origin) -> None:
    text = json.dumps(origin.to_dict(), indent=2, sort_keys=True) + "\n"
    atomic_write(folder / FILE, text)


def read(folder: Path) -> Origin | None:
    """The bundle's origin; None when it has none (a bundle ``lock`` made)."""
    path = folder / FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise UsageError(
            f"{path}: not readable as envlock's captured.json ({e})",
            hint=f"remove {path} (the bundle works without it) or capture again",
        ) from None
    fields = ("interpreter", "venv", "python", "platform", "machine")
    if (
        not isinstance(doc, dict)
        or doc.get("schema") != SCHEMA
        or not all(isinstance(doc.get(k), str) for k in fields if k != "venv")
        or not isinstance(doc.get("venv"), (str, type(None)))
    ):
        raise UsageError(
            f"{path}: not envlock's captured.json (schema {SCHEMA})",
            hint=f"remove {path} (the bundle works without it) or capture again",
        )
    return Origin(**{k: doc[k] for k in fields})
