"""``envlock notebook install|uninstall`` as one call each: ``install(python)``,
``uninstall(python)``: the ``%envlock`` extension in a kernel's interpreter.

``install --venv PY`` copies envlock's two standard-library-only files
(``envlock/__init__.py``, ``envlock/notebook.py``) into
``$XDG_DATA_HOME/envlock/notebook/<key>/envlock/`` (default ``~/.local/share``),
records there which envlock executable ``%envlock`` runs (the one installing),
and names the folder in ``envlock-notebook.pth`` in PY's site-packages (its user
site when that is not writable). No distribution is installed: pip freeze,
``envlock capture`` and ``restore --in-place --exact`` do not see it.
``uninstall`` removes both.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

from envlock.errors import EnvironmentFailure, UsageError

PTH = "envlock-notebook.pth"
SHIM_FILES = ("__init__.py", "notebook.py")

# Asked of the target interpreter: its version, site-packages, user site.
_ASK = (
    "import json, os, site, sys, sysconfig\n"
    "user = site.getusersitepackages() if site.ENABLE_USER_SITE else None\n"
    "print(json.dumps({'version': list(sys.version_info[:3]), 'executable': sys.executable,\n"
    "  'purelib': sysconfig.get_paths()['purelib'], 'user_site': user}))\n"
)
_CHECK = (
    "import json, envlock, envlock.notebook\n"
    "print(json.dumps({'file': envlock.__file__,\n"
    "  'extension': callable(getattr(envlock, 'load_ipython_extension', None))}))\n"
)


def data_home(environ: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    """Where the extension's copies live: $XDG_DATA_HOME/envlock/notebook, default
    ~/.local/share/envlock/notebook. A relative XDG_DATA_HOME is ignored, as the
    XDG Base Directory specification says (a .pth naming a relative folder would
    name another folder in every process that starts elsewhere)."""
    base = environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "envlock" / "notebook"


def _interpreter(venv: str) -> str:
    from envlock.venv.interpreter import choose

    return choose(venv, None, {}).python


class SiteFacts(TypedDict):
    """What _ASK prints about an interpreter."""

    version: list[int]
    executable: str
    purelib: str
    user_site: str | None


class ExtensionCheck(TypedDict):
    """What _CHECK prints: the envlock it imports, and whether it has the extension."""

    file: str
    extension: bool


def _ask(python: str, code: str, what: str) -> object:
    """The JSON ``code`` printed in ``python`` (what the caller asked it to print)."""
    try:
        done = subprocess.run(
            [python, "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            cwd="/",  # nothing of the current folder on its sys.path
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EnvironmentFailure(f"{python} did not run ({e})") from None
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise EnvironmentFailure(f"{python}: {what} failed (exit {done.returncode}): {tail}")
    from envlock.readers import json_from_output

    # a banner its start-up prints (a sitecustomize, a conda activation) comes first
    return json_from_output(
        done.stdout,
        f"{python}: {what}",
        hint=f"check what it prints when it starts: {shlex.quote(python)} -c pass",
        error=EnvironmentFailure,
    )


def _site_dirs(python: str) -> tuple[SiteFacts, list[Path]]:
    facts = cast("SiteFacts", _ask(python, _ASK, "reading its site-packages"))  # _ASK's shape
    if tuple(facts["version"][:2]) < (3, 8):
        version = ".".join(str(v) for v in facts["version"])
        raise UsageError(
            f"--venv {python}: Python {version}; the extension needs 3.8 or newer",
            hint="run the notebook on a kernel of Python 3.8 or newer",
        )
    dirs = [Path(facts["purelib"])]
    user_site = facts.get("user_site")
    if user_site:
        dirs.append(Path(user_site))
    return facts, dirs


def _writable(folder: Path) -> bool:
    probe = folder
    while not probe.exists():  # a user site not made yet: its nearest existing parent
        probe = probe.parent
    return os.access(probe, os.W_OK)


def _self_command() -> list[str]:
    """The envlock executable running now (its console script beside its interpreter)."""
    script = Path(sys.executable).parent / "envlock"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script.absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "envlock"]


def shim_folder(site: Path, environ: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    """The folder a .pth in ``site`` names: one per site-packages folder."""
    key = hashlib.sha256(str(site).encode("utf-8")).hexdigest()[:16]
    return data_home(environ) / key


def install(venv: str) -> Installed:
    import envlock
    from envlock.fsutil import write_files

    python = _interpreter(venv)
    facts, dirs = _site_dirs(python)
    site = next((d for d in dirs if _writable(d)), None)
    if site is None:
        shown = " or ".join(str(d) for d in dirs)
        raise UsageError(
            f"--venv {venv}: cannot write to {shown}",
            hint="run it as the user who owns that interpreter, or give a kernel whose Python "
            "is in a venv",
        )
    folder = shim_folder(site)
    if "\n" in str(folder) or "\r" in str(folder):  # a .pth file is read line by line
        raise UsageError(
            f"the extension's folder {str(folder)!r} has a line break in its name",
            hint="set XDG_DATA_HOME to a folder whose path has none",
        )
    package = folder / "envlock"
    source = Path(envlock.__file__).parent
    command = _self_command()
    for path in (folder, package):  # made by envlock: a link there is someone else's
        if path.is_symlink():
            raise EnvironmentFailure(
                f"{path} is a symbolic link (to {os.readlink(path)}); envlock does not write "
                "the extension through it, nothing was written",
                hint=f"remove the link: rm {shlex.quote(str(path))}",
            )
    try:
        record = {"envlock": command, "interpreter": python, "site": str(site)}
        record["written_by"] = f"envlock {envlock.__version__}"
        shim: dict[str, bytes | str] = {n: (source / n).read_bytes() for n in SHIM_FILES}
        shim["notebook.json"] = json.dumps(record, indent=2) + "\n"
        # each file renamed into place: a link planted at one of the names is
        # replaced, the file it points to left alone
        write_files(package, shim)
        site.mkdir(parents=True, exist_ok=True)
        # replaced by a rename, never written through: a link planted at the name in a
        # shared kernel environment is replaced, the file it points to left alone
        write_files(site, {PTH: f"{folder}\n"})
    except OSError as e:
        raise EnvironmentFailure(f"cannot write the extension: {e}") from None
    check = cast("ExtensionCheck", _ask(python, _CHECK, "importing the extension"))  # _CHECK's
    loads = Path(check["file"]).resolve().parent
    note = None
    if loads != package.resolve():
        note = f"{python} imports envlock from {loads} first; %load_ext envlock loads that one"
    version = ".".join(str(v) for v in facts["version"])
    doc = {
        "interpreter": python,
        "python": version,
        "pth": str(site / PTH),
        "folder": str(package),
        "envlock": command,
        "loads": str(loads),
        "note": note,
    }
    return Installed(doc)


STDLIB = "standard library only"


@dataclass(frozen=True)
class Installed:
    """What ``notebook install`` wrote (``to_dict``: its --json)."""

    doc: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return self.doc

    def text(self) -> str:
        from envlock.output import table

        d = self.doc
        rows = [
            ["interpreter", d["interpreter"], f"Python {d['python']}"],
            [".pth", d["pth"], "names the folder below; no distribution installed"],
            [
                "extension",
                d["folder"],
                "envlock/__init__.py and notebook.py, standard library only",
            ],
            ["runs", shlex.join(d["envlock"]), "the envlock %envlock runs, outside the kernel"],
        ]
        return (
            table(["", "path", "note"], rows)
            + (f"note: {d['note']}\n" if d["note"] else "")
            + "in a notebook on this interpreter's kernel, run: %load_ext envlock\n"
            "  then e.g.: %envlock doctor\n"
        )


@dataclass(frozen=True)
class Uninstalled:
    """What ``notebook uninstall`` removed (``to_dict``: its --json)."""

    interpreter: str
    removed: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"interpreter": self.interpreter, "removed": self.removed}

    def text(self) -> str:
        if not self.removed:
            return f"{self.interpreter}: the extension was not installed there; nothing removed\n"
        return f"{self.interpreter}: the extension removed\n" + "".join(
            f"  - {path}\n" for path in self.removed
        )


MAX_PTH = 64 * 1024  # one line naming a folder


def uninstall(venv: str) -> Uninstalled:
    import shutil

    from envlock.readers import read_text

    python = _interpreter(venv)
    _, dirs = _site_dirs(python)
    removed: list[str] = []
    home = data_home().resolve()
    try:
        for site in dirs:
            pth = site / PTH
            if not pth.is_file():
                continue
            text = read_text(pth, limit=MAX_PTH, error=EnvironmentFailure)
            named = Path(text.strip() or ".").resolve()
            pth.unlink()
            removed.append(str(pth))
            if named.parent == home and named.is_dir():  # only a folder install wrote
                shutil.rmtree(named)
                removed.append(str(named))
    except OSError as e:
        raise EnvironmentFailure(f"cannot remove the extension: {e}") from None
    return Uninstalled(python, removed)
