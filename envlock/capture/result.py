"""What ``envlock capture`` is asked (``CaptureRequest``) and what it answers: one
of ``CapturedInterpreter`` (--venv), ``CapturedFreeze`` (-r) and ``Refused``
(-r --strict with lines left out). Types only; envlock.capture does the work."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from envlock.bundle.folder import LockedFolder
    from envlock.bundle.left_out import LeftOut
    from envlock.bundle.origin import OriginDict
    from envlock.venv.capture import Captured
    from envlock.venv.leftout import PythonChoice


@dataclass(frozen=True)
class CaptureRequest:
    """What ``envlock capture`` was asked: exactly one of ``venv`` and ``freeze``.

    ``os_info``, ``with_`` and ``strict`` go with ``freeze`` only; ``indexes`` and
    ``routes`` are the ``--index NAME=URL`` and ``--route WHAT=NAME`` values as given
    (envlock.index.routing parses them)."""

    output: str
    venv: str | None = None
    freeze: str | None = None
    python: str | None = None
    os_info: str | None = None
    with_: tuple[str, ...] = ()
    strict: bool = False
    cuda_source: str | None = None
    resolver: str = "uv"
    index_url: str | None = None
    indexes: tuple[str, ...] = ()
    routes: tuple[str, ...] = ()
    only_binary: bool = False
    offline: bool = False
    force: bool = False


def _packages(written: LockedFolder) -> dict[str, str]:
    return {p.name: p.version for p in written.lock.packages}


def _warnings(written: LockedFolder) -> tuple[str, ...]:
    return tuple(written.lock.gpu.problems) if written.lock.gpu else ()


@dataclass(frozen=True)
class CapturedInterpreter:
    """``--venv``: the bundle written, and what the interpreter had that it differs from."""

    captured: Captured
    written: LockedFolder
    notes: tuple[str, ...]
    driver: str | None  # "NNN.NN (source)" of this machine's NVIDIA driver, if one shows
    origin: OriginDict | None  # DIR/captured.json as written
    differs: tuple[str, ...]  # "name version: locked X" for each pin locked otherwise
    exit_code: int = 0

    @property
    def warnings(self) -> tuple[str, ...]:
        return _warnings(self.written)

    def to_dict(self) -> dict[str, Any]:
        locked = _packages(self.written)
        return {
            "captured": {**self.captured.to_dict(), "driver": self.driver},
            "origin": self.origin,
            "dir": str(self.written.folder),
            "lock_digest": f"sha256:{self.written.digest}",
            "gpu": self.written.lock.gpu.to_dict() if self.written.lock.gpu else None,
            "packages": [{"name": n, "version": v} for n, v in sorted(locked.items())],
            "differs": list(self.differs),
            "notes": list(self.notes),
            "files": list(self.written.files),
        }

    def text(self) -> str:
        captured, origin = self.captured, self.origin
        where = f"Python {captured.python}" if captured.python else "a pip freeze"
        if captured.left_out:
            where += f"; {len(captured.left_out)} left out, see the notes"
        out = [
            f"captured {captured.framework} {captured.version} and {len(captured.pins)} other "
            f"distributions from {captured.source} ({where})"
            + (f"; driver {self.driver}" if self.driver else "")
        ]
        if origin is not None:
            if origin["venv"]:
                where = f"the venv {origin['venv']}); doctor and restore of this bundle act on it"
            else:  # restore makes no new venv in place of a system interpreter
                where = (
                    "outside a venv); doctor of this bundle inspects it, restore --in-place "
                    "syncs it"
                )
            out.append(
                f"wrote {self.written.folder / 'captured.json'}: captured from "
                f"{origin['interpreter']} ({where} on this machine"
            )
        if self.differs:
            out.append("locked at other versions than installed:")
            out += [f"  {line}" for line in self.differs]
        else:
            out.append("every captured distribution is locked at its installed version")
        return "".join(line + "\n" for line in out)


@dataclass(frozen=True)
class CapturedFreeze:
    """``-r FREEZE``: the bundle written, the Python chosen and every line left out."""

    captured: Captured
    written: LockedFolder
    notes: tuple[str, ...]
    choice: PythonChoice
    left: tuple[LeftOut, ...]  # each line left out, with its reason (DIR/left-out.json)
    total: int  # the freeze's lines
    locked_n: int  # the lines locked at their own version
    differs: tuple[str, ...]  # "LINE: locked X" for each line locked otherwise
    summary: str  # "locked N of M; ..."
    exit_code: int = 0

    @property
    def warnings(self) -> tuple[str, ...]:
        return _warnings(self.written)

    def to_dict(self) -> dict[str, Any]:
        locked = _packages(self.written)
        choice = self.choice
        return {
            "captured": self.captured.to_dict(),
            "origin": None,
            "python": {
                "version": choice.python,
                "how": choice.how,
                "deciding": list(choice.deciding),
            },
            "dir": str(self.written.folder),
            "lock_digest": f"sha256:{self.written.digest}",
            "gpu": self.written.lock.gpu.to_dict() if self.written.lock.gpu else None,
            "packages": [{"name": n, "version": v} for n, v in sorted(locked.items())],
            "differs": list(self.differs),
            "left_out": [item.to_dict() for item in self.left],
            "lines": self.total,
            "locked": self.locked_n,
            "summary": self.summary,
            "notes": list(self.notes),
            "files": list(self.written.files),
        }

    def text(self) -> str:
        from envlock.bundle import left_out as lofile

        out = [self.choice.how, *(f"  {why}" for why in self.choice.deciding)]
        if self.differs:
            out.append("locked at other versions than the freeze's:")
            out += [f"  {text}" for text in self.differs]
        if self.left:
            out.append(
                f"left out ({len(self.left)}; recorded in {self.written.folder / lofile.FILE}):"
            )
            for item in self.left:
                out.append(f"  {item.describe()}")
                out.append(f"    take it in: {item.command or 'no command yet'}")
        out.append(self.summary)
        return "".join(line + "\n" for line in out)


@dataclass(frozen=True)
class Refused:
    """``--strict`` with lines that would be left out: nothing written, exit 1."""

    freeze: str
    total: int
    left: tuple[LeftOut, ...]
    written: None = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    exit_code: int = 1

    @property
    def message(self) -> str:
        """What stderr says: each line that would be left out."""
        listing = "\n".join(f"  {item.describe()}" for item in self.left)
        return (
            f"envlock: {len(self.left)} of {self.total} line(s) of {self.freeze} would be left "
            f"out (--strict; nothing written):\n{listing}\n"
        )


CaptureResult = Union[CapturedInterpreter, CapturedFreeze, Refused]
