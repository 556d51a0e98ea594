"""Which interpreter envlock doctor inspects, and running the probe in it.

The order: ``--venv PATH``; else the environment the bundle was captured from
(``DIR/captured.json``, on the machine it was captured on, while it is there);
else the venv ``bootstrap.sh`` makes for the bundle (``DIR/.venv``, its
default); else the active venv (``$VIRTUAL_ENV``);
else envlock's own interpreter. The choice is reported with its reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from envlock.errors import EnvironmentFailure, EnvlockError, UsageError

if TYPE_CHECKING:
    from envlock.bundle.origin import Origin
    from envlock.venv.probe import ProbeDoc

PROBE_TIMEOUT = 300.0


@dataclass(frozen=True)
class Target:
    python: str  # the interpreter the probe runs in
    chosen_by: str  # "--venv", "captured", "bundle", "VIRTUAL_ENV", "envlock"
    reason: str  # one line for people: "the venv bootstrap.sh made for env/ (env/.venv)"

    def to_dict(self) -> dict[str, str]:
        return {"python": self.python, "chosen_by": self.chosen_by, "reason": self.reason}


class InterpreterGone(EnvlockError):
    """The venv's interpreter is a link to a Python that no longer exists: a
    finding (exit 1), not a wrong --venv."""

    exit_code = 1

    def __init__(self, venv: Path, link: Path, points_to: str) -> None:
        super().__init__(
            f"{link} is a link to {points_to}, which no longer exists",
            hint="the venv cannot run: restore it from its bundle with 'envlock restore "
            f"BUNDLE --venv {venv}', or make it anew: python3 -m venv --clear {venv}",
        )
        self.venv = str(venv)
        self.link = str(link)
        self.points_to = points_to


def _venv_python(venv: Path) -> Path | None:
    for name in ("bin/python", "bin/python3"):
        candidate = venv / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    for name in ("bin/python", "bin/python3"):
        candidate = venv / name
        if candidate.is_symlink() and not candidate.exists():  # a dangling link
            raise InterpreterGone(venv, candidate, os.readlink(candidate))
    return None


def venv_of(python: str) -> str | None:
    """The venv folder ``python`` runs (bin/python beside a pyvenv.cfg), else None:
    fixes name it with --venv."""
    folder = Path(python).parent.parent
    return str(folder) if (folder / "pyvenv.cfg").is_file() else None


def choose(venv: str | None, lock_dir: Path | None, environ: dict[str, str]) -> Target:
    """The interpreter to inspect, and why that one."""
    if venv is not None:
        path = Path(venv)
        if path.is_file() and os.access(path, os.X_OK):  # an interpreter given directly
            return Target(str(path.absolute()), "--venv", f"--venv {path}")
        python = _venv_python(path)
        if python is None:
            raise UsageError(
                f"--venv {venv}: no bin/python there",
                hint="give the folder of a venv (the one holding bin/python and pyvenv.cfg)",
            )
        return Target(str(python.absolute()), "--venv", f"--venv {path}")
    note = ""
    if lock_dir is not None:
        from envlock.bundle import origin

        found = origin.read(lock_dir)
        captured = _captured(lock_dir, found)
        if captured is not None:
            return captured
        ignored = origin.ignored(lock_dir, found)
        note = f" ({ignored})" if ignored else ""
        python = _venv_python(lock_dir / ".venv")
        if python is not None:
            return Target(
                str(python.absolute()),
                "bundle",
                f"the venv bootstrap.sh made for {lock_dir} ({lock_dir / '.venv'}){note}",
            )
    active = environ.get("VIRTUAL_ENV")
    if active:
        python = _venv_python(Path(active))
        if python is not None:
            return Target(
                str(python.absolute()), "VIRTUAL_ENV", f"the active venv ({active}){note}"
            )
    return Target(sys.executable, "envlock", f"envlock's own interpreter ({sys.executable}){note}")


def _captured(lock_dir: Path, found: Origin | None) -> Target | None:
    """The environment the bundle was captured from (DIR/captured.json), when
    this user's envlock captured it on this machine (its MAC matches) and it is
    still there (a dangling venv interpreter is InterpreterGone: a finding)."""
    from envlock.bundle import origin

    if found is None or not found.here():
        return None
    record = lock_dir / origin.FILE
    if found.venv:
        python = _venv_python(Path(found.venv))
        if python is None:
            return None
        return Target(
            str(python.absolute()),
            "captured",
            f"the venv {lock_dir} was captured from ({found.venv}, {record})",
        )
    path = Path(found.interpreter)
    if not (path.is_file() and os.access(path, os.X_OK)):
        return None
    return Target(str(path), "captured", f"the interpreter {lock_dir} was captured from ({record})")


def probe_source() -> str:
    from importlib import resources

    return (resources.files("envlock.venv") / "probe.py").read_text(encoding="utf-8")


def run_probe(
    target: Target,
    *,
    tensorflow: str,
    deep: bool,
    libraries: tuple[str, ...] = (),
    timeout: float = PROBE_TIMEOUT,
    isolated: bool = False,
) -> ProbeDoc:
    """Run the probe in ``target.python``; its JSON document. ``tensorflow``:
    "yes" (import it), "if-installed" (and list the libraries its build implies)
    or "no". ``isolated``: without PYTHONPATH and PYTHONHOME (what the venv holds,
    not what this shell adds; doctor keeps them, they are part of what it inspects).
    A probe that cannot run (a broken interpreter) is an EnvironmentFailure, exit 3."""
    from envlock.venv.probe import MARK

    args = [target.python, "-c", probe_source()]
    if deep:
        args.append("--deep")
    if tensorflow == "yes":
        args.append("--tensorflow")
    elif tensorflow == "if-installed":
        args += ["--tensorflow-if-installed", "--libraries-from-build"]
    for soname in libraries:
        args += ["--library", soname]
    env = dict(os.environ)
    if isolated:
        env.pop("PYTHONPATH", None)
        env.pop("PYTHONHOME", None)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the probe reads facts, not TF's log noise
    with tempfile.TemporaryDirectory(prefix="envlock-doctor-") as cwd:  # nothing to shadow
        try:
            out = subprocess.run(
                args,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise EnvironmentFailure(
                f"the probe in {target.python} did not answer within {timeout:.0f} s",
                hint="check that the interpreter starts: run it with -c pass",
            ) from None
        except OSError as e:
            raise EnvironmentFailure(
                f"cannot run {target.python}: {e.strerror or e}",
                hint="point --venv at a working venv",
            ) from None
    for line in reversed(out.stdout.splitlines()):
        if line.startswith(MARK):
            try:
                doc = json.loads(line[len(MARK) :])
            except ValueError:
                break
            if isinstance(doc, dict):
                doc["stderr_tail"] = out.stderr[-4000:]
                # the probe's document, as it wrote it (findings read it defensively)
                return cast("ProbeDoc", doc)
            break
    detail = (out.stderr or out.stdout).strip().splitlines()
    raise EnvironmentFailure(
        f"the probe in {target.python} failed (exit {out.returncode}): "
        f"{detail[-1] if detail else 'no output'}",
        hint="check that the interpreter starts: run it with -c pass",
    )
