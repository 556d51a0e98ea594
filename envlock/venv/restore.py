"""``envlock restore DIR``: put the locked environment back, exactly, hash-checked.

The venv path is a symbolic link to versioned folders beside it
(``PATH -> PATH.envlock-N``). A venv cannot be renamed (its scripts and
``activate`` name their own folder), so each restore builds a whole new venv
in ``PATH.envlock-<N+1>``, installs the lock into it with hash checking
(``uv pip install --require-hashes --no-deps -r requirements.txt``), runs the
bundle's smoke harness in it, and only then swaps the link: a new link made
under a temp name, then ``os.replace`` over ``PATH`` (atomic). Until that
rename the old venv is untouched and in use; a restore killed at any point
before it leaves the old one in place, and the next restore removes what the
killed one left (``PATH.envlock-*`` folders the link does not name, temp links).

A ``PATH`` that is a plain venv folder today (made by bootstrap.sh or by hand)
is converted at the switch: the new link is made under a temp name, the
folder is renamed to ``PATH.envlock-0`` and the link renamed to ``PATH``.
Scripts of the old venv name ``PATH/bin/python``, which is then the new venv's.
Between those two renames ``PATH`` is missing for an instant; a journal file
(``PATH.envlock-switch``) written before them lets the next restore finish the
switch. The previous venv folder is kept until the next restore (a rollback is
``ln -sfn PATH.envlock-N PATH``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from envlock.errors import CheckFailed, EnvironmentFailure, UsageError
from envlock.fsutil import write_files
from envlock.venv.install import (
    INSTALL_TIMEOUT,
    RestoreRequest,
    install_argv,
    restore_command,
    run_step,
    wheelhouse_command,
)
from envlock.venv.venvlink import (
    SUFFIX,
    clean_old,
    current_folder,
    journal_path,
    locked,
    recover,
    temp_link,
    versioned,
)

if TYPE_CHECKING:
    from envlock.model import Lock
    from envlock.venv.inplace import InPlaceResult, UndoResult
    from envlock.venv.kernel import KernelSpec

SMOKE_TIMEOUT = 1800

_WHO = "import sys; print(sys.executable); print('%d.%d' % sys.version_info[:2])"


@dataclass(frozen=True)
class Changes:
    added: tuple[tuple[str, str], ...] = ()
    removed: tuple[tuple[str, str], ...] = ()
    changed: tuple[tuple[str, str, str], ...] = ()  # name, old, new

    def lines(self) -> list[str]:
        out = [f"  + {n} {v}" for n, v in self.added]
        out += [f"  - {n} {v}" for n, v in self.removed]
        out += [f"  ~ {n} {a} -> {b}" for n, a, b in self.changed]
        return out


@dataclass(frozen=True)
class RestoreResult:
    venv: Path
    folder: Path  # the versioned folder the venv link now names
    previous: Path | None  # the folder it named before (kept until the next restore)
    python: str  # the interpreter the venv was made with
    minor: str
    changes: Changes
    smoke_status: str
    cleaned: tuple[str, ...] = field(default=())
    converted: bool = False
    compared: str = "yes"  # yes | no-old-venv | old-venv-broken
    kernel: KernelSpec | None = None  # the kernelspec --kernel wrote


# ----------------------------------------------------------------- Python


def _who(python: str) -> tuple[str, str] | None:
    """(sys.executable, "3.X") of ``python``; None when it does not run."""
    try:
        out = subprocess.run(
            [python, "-c", _WHO], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.split()
    if out.returncode != 0 or len(lines) != 2:
        return None
    return lines[0], lines[1]


def _version_key(path: Path) -> tuple[int, ...]:
    parts = path.parent.parent.name.split(".")
    return tuple(int(p) if p.isdigit() else -1 for p in parts)


def python_candidates(minor: str) -> Iterator[str]:
    """Where a CPython ``minor`` may be: PATH, pyenv, then uv-managed interpreters."""
    found = shutil.which(f"python{minor}")
    if found:
        yield found
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    if root.is_dir():
        pys = [p / "bin" / "python" for p in root.glob(f"{minor}.*") if (p / "bin").is_dir()]
        for p in sorted(pys, key=_version_key, reverse=True):
            if p.exists() and re.fullmatch(rf"{re.escape(minor)}\.\d+", p.parent.parent.name):
                yield str(p)
    try:
        from envlock.lock.uv import uv_bin

        uv = uv_bin()
    except EnvironmentFailure:
        return
    try:
        out = subprocess.run(
            [uv, "python", "find", "--no-python-downloads", minor],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return
    if out.returncode == 0 and out.stdout.strip():
        yield out.stdout.strip().splitlines()[0]


def find_python(minor: str, given: str | None) -> str:
    """The interpreter (its sys.executable) of CPython ``minor`` to build the venv with."""
    if given:
        who = _who(given)
        if who is None:
            raise UsageError(
                f"--base-python {given}: does not run", hint="give a python executable"
            )
        if who[1] != minor:
            raise UsageError(
                f"--base-python {given} is Python {who[1]}; the lock is for Python {minor}",
                hint=f"give a python{minor}",
            )
        return who[0]
    for candidate in python_candidates(minor):
        who = _who(candidate)
        if who is not None and who[1] == minor:
            return who[0]
    raise UsageError(
        f"no Python {minor} on this machine (looked on PATH for python{minor}, "
        f"in pyenv's versions and among uv's interpreters)",
        hint=f"install one: uv python install {minor}, or pyenv install {minor}; "
        f"or pass --base-python PATH",
    )


# ----------------------------------------------------------------- steps


def distributions(python: Path) -> dict[str, str] | None:
    """{normalized name: version} installed for ``python`` (doctor's probe, without
    PYTHONPATH); None when it does not run."""
    from packaging.utils import canonicalize_name

    from envlock.venv.interpreter import Target, run_probe

    try:
        doc = run_probe(
            Target(str(python), "restore", f"the venv of {python}"),
            tensorflow="no",
            deep=False,
            timeout=120,
            isolated=True,
        )
    except EnvironmentFailure:
        return None
    out: dict[str, str] = {}
    for dist in doc.get("distributions") or []:
        out.setdefault(canonicalize_name(str(dist["name"])), str(dist["version"]))
    return out


def compare(old: dict[str, str], new: dict[str, str]) -> Changes:
    return Changes(
        added=tuple((n, new[n]) for n in sorted(new.keys() - old.keys())),
        removed=tuple((n, old[n]) for n in sorted(old.keys() - new.keys())),
        changed=tuple(
            (n, old[n], new[n]) for n in sorted(old.keys() & new.keys()) if old[n] != new[n]
        ),
    )


def smoke(req: RestoreRequest, python: Path) -> dict[str, object]:
    harness = req.bundle / "envlock_smoke.py"
    argv = [str(python), str(harness), "--expect", str(req.bundle / "expect.json")]
    argv += ["--no-benchmark"] + (["--allow-cpu"] if req.allow_cpu else [])
    env = dict(os.environ)
    runtime = req.bundle / "runtime.json"
    # absent: the defaults; there but not a small regular file (a FIFO, a device, a
    # folder): exit 2 naming it, not a smoke test that silently ran without it
    from envlock.readers import MAX_JSON_BYTES, read_optional

    if read_optional(runtime, "runtime settings", limit=MAX_JSON_BYTES) is not None:
        env["ENVLOCK_RUNTIME_CONFIG"] = str(runtime)
    env.pop("PYTHONPATH", None)
    try:
        out = subprocess.run(
            argv, capture_output=True, text=True, timeout=SMOKE_TIMEOUT, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        raise CheckFailed(
            f"the smoke test in the new venv gave no answer in {SMOKE_TIMEOUT} s"
        ) from None
    try:
        doc = json.loads(out.stdout)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        tail = "\n".join(out.stderr.strip().splitlines()[-10:])
        doc = {"status": "FAILED", "checks": [], "error": tail}
    if out.returncode != 0 or doc.get("status") not in ("PASSED", "WARNED"):
        failed = [
            f"{c.get('name')}: {c.get('reason')}"
            for c in doc.get("checks", [])
            if isinstance(c, dict) and c.get("status") == "FAIL"
        ] or [str(doc.get("error") or f"exit {out.returncode}")]
        raise CheckFailed(
            "the smoke test failed in the new venv, so it was not switched in "
            f"({req.venv} is unchanged): {'; '.join(failed)}",
            hint=None
            if req.allow_cpu
            else f"on a machine without a GPU: {restore_command(req, allow_cpu=True)}",
        )
    return doc


def check_gpu(req: RestoreRequest) -> None:
    """An NVIDIA driver with a GPU is here, unless --allow-cpu: else a CheckFailed
    (exit 1) now, before anything is built, with the command for the CPU case.
    The bundle's smoke test would fail on the same machine after the whole build."""
    if req.allow_cpu:
        return
    from envlock.driver import detect
    from envlock.errors import EnvlockError

    try:
        gpus = len(detect().gpus)
        why = "the driver lists no GPU"
    except EnvlockError as e:
        gpus = 0
        why = e.message.removeprefix("--driver auto: ")
    if gpus:
        return
    raise CheckFailed(
        f"no NVIDIA GPU on this machine ({why}); the bundle's smoke test needs one, so "
        "restore stopped before building anything (nothing was made)",
        hint="install the NVIDIA driver (nvidia-smi lists the GPU) and run restore again; "
        f"or, if the CPU is meant: {restore_command(req, allow_cpu=True)}",
    )


def check_wheelhouse_matches(req: RestoreRequest, lock: Lock) -> None:
    """Every locked file is in --wheelhouse with the lock's size and sha256 (wheels,
    the source archives of packages locked by their sdist), and a wheel of each
    build requirement of those with a sha256 the lock records: else a UsageError
    (exit 2: the folder given does not match the lock, which is bad input, not a
    failed download) naming every missing or damaged file at once, before anything
    is built, with the command that fills it."""
    from envlock.venv.wheelhouse import check_wheelhouse, locked_files, unheld_build_requirements

    if req.wheelhouse is None:
        return
    problems = check_wheelhouse(lock, req.wheelhouse)
    if not problems:
        return
    builds = unheld_build_requirements(lock)
    total = len(locked_files(lock)) + len(builds)
    # a lock of wheels only says wheels, as before source archives were locked
    noun = (
        "locked files"
        if builds or lock.build_constraints or any(p.sdist for p in lock.packages)
        else "locked wheels"
    )
    lines = "".join(f"\n  {name}: {problem}" for name, problem in problems)
    raise UsageError(
        f"--wheelhouse {req.wheelhouse} does not match the lock: {len(problems)} of "
        f"{total} {noun} missing or damaged; nothing was built (exit 2: the "
        f"wheelhouse given is not the lock's, a bad input){lines}",
        hint="fill it (downloads only what is missing or damaged, hash-checked): "
        f"{wheelhouse_command(req.bundle, req.wheelhouse)} && {restore_command(req)}",
    )


_OFFLINE_MISS = re.compile(r"not found in the cache|network was disabled", re.IGNORECASE)


def _uv_offline_miss(message: str) -> bool:
    return bool(_OFFLINE_MISS.search(message))


def _offline_without_cache(req: RestoreRequest) -> UsageError:
    wh = Path(f"{os.path.abspath(req.bundle)}-wheelhouse")
    return UsageError(
        "--offline: uv's cache does not hold every locked wheel and no --wheelhouse was "
        f"given, so there is nothing to install from ({req.venv} is unchanged)",
        hint="fill a wheelhouse (needs the index once), then restore from it offline: "
        f"{wheelhouse_command(req.bundle, wh)} && "
        f"{restore_command(req, wheelhouse=wh, offline=True)}",
    )


def _check_bundle(req: RestoreRequest) -> Lock:
    from envlock.lock.pylock import read_lock

    lock = read_lock(req.bundle)
    for name in ("requirements.txt", "envlock_smoke.py", "expect.json"):
        if not (req.bundle / name).is_file():
            raise UsageError(
                f"{req.bundle / name} is missing",
                hint=f"render the bundle again: envlock render {req.bundle}",
            )
    if req.wheelhouse is not None and not req.wheelhouse.is_dir():
        raise UsageError(
            f"--wheelhouse {req.wheelhouse}: no such folder",
            hint=f"make it: {wheelhouse_command(req.bundle, req.wheelhouse)} && "
            f"{restore_command(req)}",
        )
    return lock


def _install(
    req: RestoreRequest, lock: Lock, python: Path, env: dict[str, str], build: Path | None
) -> None:
    """The hashed install of the whole lock (``build``: the build constraints of its
    source archives, or None); from a wheelhouse, a package routed to an extra index
    is installed from the wheelhouse's copy of the file it was locked from
    (requirements.txt names its URL, which an offline install cannot fetch)."""
    from envlock.venv.install import requirement_lines

    if req.wheelhouse is None or not any(p.index for p in lock.packages):
        argv = install_argv(req, python, build=build)
        run_step(argv, "the hashed install", INSTALL_TIMEOUT, env)
        return
    with tempfile.TemporaryDirectory(prefix="envlock-restore-") as folder:
        reqs = Path(folder) / "requirements.txt"
        names = {p.name for p in lock.packages}
        reqs.write_text(requirement_lines(lock, names, req.wheelhouse), encoding="utf-8")
        argv = install_argv(req, python, reqs, build=build)
        run_step(argv, "the hashed install", INSTALL_TIMEOUT, env)


def _build(
    req: RestoreRequest, lock: Lock, python: str, new: Path, say: Callable[[str], None]
) -> dict[str, object]:
    """The new venv in ``new``: created, the lock installed with hashes (source
    archives built with the lock's build constraints), smoke-tested."""
    from envlock.lock.uv import uv_env
    from envlock.venv.install import build_constraints_file, from_source_line

    say(f"creating {new.name} with {python}")
    create_venv(python, new)
    new_python = new / "bin" / "python"
    say("installing the lock (hash-checked)")
    built = from_source_line(lock)
    if built:
        say(built)
    env = uv_env()  # UV_SYSTEM_CERTS there; UV_NATIVE_TLS would add uv's deprecation warning
    try:
        with build_constraints_file(lock) as build:
            _install(req, lock, new_python, env, build)
    except EnvironmentFailure as e:
        if req.offline and req.wheelhouse is None and _uv_offline_miss(e.message):
            raise _offline_without_cache(req) from None
        raise
    say("running the smoke test in the new venv")
    return smoke(req, new_python)


# The wheels `python -m venv` would seed a venv with, as ensurepip picks them
# (CPython's Lib/ensurepip/__init__.py): pip, and setuptools up to 3.11; from the
# distributor's WHEEL_PKG_DIR when it sets one (Debian: /usr/share/python-wheels),
# else ensurepip's _bundled folder at the versions ensurepip names. Printed as the
# folder, then NAME==VERSION a line.
_SEED_WHEELS = r"""
import ensurepip, glob, os, sysconfig
wanted = [("pip", getattr(ensurepip, "_PIP_VERSION", None))]
if getattr(ensurepip, "_SETUPTOOLS_VERSION", None):
    wanted.append(("setuptools", ensurepip._SETUPTOOLS_VERSION))
folder = sysconfig.get_config_var("WHEEL_PKG_DIR")
if folder:  # the distributor's wheels, whatever their versions
    wanted = [(name, "*") for name, _ in wanted]
else:
    folder = os.path.join(os.path.dirname(ensurepip.__file__), "_bundled")
print(folder)
for name, version in wanted:
    found = glob.glob(os.path.join(folder, "%s-%s-py*-none-any.whl" % (name, version)))
    if len(found) != 1:
        raise SystemExit("no single %s wheel in %s" % (name, folder))
    print("%s==%s" % (name, os.path.basename(found[0]).split("-")[1]))
"""


def create_venv(python: str, new: Path) -> None:
    """``python -m venv NEW`` with the same pip (and setuptools) in it, in a
    fraction of the time: the venv is made without pip, then uv installs the
    interpreter's own ensurepip wheels by name from their folder, as ensurepip
    has pip do (no index, no record of a direct URL; ~0.6 s against ~5 s for
    ensurepip, which runs pip to install pip). Where those wheels cannot be found
    or installed, the venv is made by ``python -m venv`` after all."""
    from envlock.lock.uv import uv_bin, uv_env

    doing = f"creating the venv {new}"
    run_step([python, "-m", "venv", "--without-pip", str(new)], doing, 600)
    new_python = str(new / "bin" / "python")
    try:
        folder, *wanted = run_step([new_python, "-c", _SEED_WHEELS], doing, 60).split()
        argv = [uv_bin(), "pip", "install", "--python", new_python, "--no-config", "-q"]
        argv += ["--no-deps", "--no-index", "--offline", "--find-links", folder, *wanted]
        run_step(argv, doing, 600, uv_env())
    except (EnvironmentFailure, ValueError):
        shutil.rmtree(new)
        run_step([python, "-m", "venv", str(new)], doing, 600)


def new_venv_path(req: RestoreRequest) -> Path:
    """The venv path a new-venv restore switches: --venv as given, or the venv
    folder of an interpreter given there; an interpreter outside a venv cannot be
    switched (exit 2, the in-place sync as the fix)."""
    from envlock.venv.interpreter import venv_of

    given = Path(req.venv)
    if given.is_file():
        folder = venv_of(str(given))
        if folder is None:
            fix = replace(req, in_place=True, kernel=None)
            raise UsageError(
                f"--venv {given}: an interpreter outside a venv; restore can build a new venv "
                "only where a venv folder is (or nothing yet), so it cannot replace this one",
                hint=f"sync the lock into it instead: {restore_command(fix)}",
            )
        return Path(os.path.abspath(folder))
    return Path(os.path.abspath(given))


def in_place_target(req: RestoreRequest) -> str:
    """The interpreter an in-place sync or undo acts on: --venv's (doctor's choice)."""
    from envlock.venv.interpreter import choose

    return choose(str(req.venv), None, {}).python


def restore_in_place(
    req: RestoreRequest, progress: Callable[[str], None] | None = None
) -> InPlaceResult:
    """``--in-place``: the lock synced into --venv's interpreter, undo saved first."""
    from envlock.venv.inplace import sync

    say = progress or (lambda _line: None)
    lock = _check_bundle(req)
    python = in_place_target(req)
    check_gpu(req)
    check_wheelhouse_matches(req, lock)
    return sync(req, lock, python, say)


def restore_undo(req: RestoreRequest) -> UndoResult:
    """``--undo``: what the newest in-place sync of --venv replaced, put back offline."""
    from envlock.venv.inplace import undo

    return undo(req, in_place_target(req), req.undo_id)


def _finish_switch(venv: Path) -> list[str]:
    """A switch that a killed restore left half done (its journal beside the venv),
    finished first, under the venv's lock: before any check can end this run, so
    the venv path is never left missing (issue #38, break 14)."""
    if not os.path.lexists(journal_path(venv)):
        return []
    with locked(venv):
        return recover(venv)


def restore(req: RestoreRequest, progress: Callable[[str], None] | None = None) -> RestoreResult:
    say = progress or (lambda _line: None)
    venv = new_venv_path(req)
    finished = _finish_switch(venv)
    lock = _check_bundle(req)
    if req.kernel is not None:
        from envlock.venv.kernel import check_name

        check_name(req.kernel)
    minor = lock.resolution.python
    if req.kernel is not None and not any(p.name == "ipykernel" for p in lock.packages):
        from envlock.venv.kernel import require_ipykernel

        old = distributions(venv / "bin" / "python") if os.path.lexists(venv) else None
        require_ipykernel(req, lock, old, restore_command(req))
    python = find_python(minor, req.base_python)
    plain = os.path.lexists(venv) and not venv.is_symlink()
    if plain and (not venv.is_dir() or not (venv / "pyvenv.cfg").is_file()):
        raise UsageError(
            f"--venv {venv}: exists and is not a venv (no pyvenv.cfg)",
            hint="give the venv's folder, or a path that does not exist yet",
        )
    if venv.is_symlink() and current_folder(venv) is None:
        raise UsageError(
            f"--venv {venv}: is a link envlock did not make (to {os.readlink(venv)})",
            hint="give the folder it points to, or a path that does not exist yet",
        )
    # fail fast, before anything is made: no GPU, then a wheelhouse that is not the lock's
    check_gpu(req)
    check_wheelhouse_matches(req, lock)
    venv.parent.mkdir(parents=True, exist_ok=True)
    with locked(venv):
        cleaned = finished + recover(venv)
        current = current_folder(venv)
        converted = os.path.lexists(venv) and not venv.is_symlink()
        cleaned += [f"removed {n}" for n in clean_old(venv, {current} if current else set())]
        zero = venv.parent / f"{venv.name}{SUFFIX}0"
        if converted and os.path.lexists(zero):  # what _clean_old left: a link or a file
            what = f"a link (to {os.readlink(zero)})" if zero.is_symlink() else "not a folder"
            raise UsageError(
                f"--venv {venv}: {zero.name} beside it is {what}; restore keeps the plain "
                "venv folder under that name and never follows or replaces a link there",
                hint=f"move or remove {zero} (rm of a link removes only the link), "
                "then run restore again",
            )
        numbers = [n for n, _ in versioned(venv)]
        number = max(numbers, default=0) + 1
        new = venv.parent / f"{venv.name}{SUFFIX}{number}"
        old_python = venv / "bin" / "python"
        had_old = os.path.lexists(venv)
        old = distributions(old_python) if had_old else None

        new_python = new / "bin" / "python"
        try:
            doc = _build(req, lock, python, new, say)
        except BaseException:
            # the old venv was never touched; what was built goes (else the next restore)
            shutil.rmtree(new, ignore_errors=True)
            raise
        now = distributions(new_python) or {}

        # the switch: a new link under a temp name, then one rename over the venv path
        link = temp_link(venv)
        link.unlink(missing_ok=True)
        os.symlink(new.name, link)
        previous = current
        if converted:
            previous = venv.parent / f"{venv.name}{SUFFIX}0"
            journal = journal_path(venv)
            # a rename into place: a link planted at the name is replaced, never written through
            write_files(journal.parent, {journal.name: json.dumps({"to": new.name})})
            os.rename(venv, previous)
            os.replace(link, venv)
            journal.unlink()
        else:
            os.replace(link, venv)
    kernel = None
    if req.kernel is not None:
        from envlock.venv.kernel import install_kernel

        say(f"registering {venv} as the Jupyter kernel {req.kernel}")
        kernel = install_kernel(req, venv, f"{venv.name} from {req.bundle.name} (envlock)")
    return RestoreResult(
        venv=venv,
        folder=new,
        previous=previous,
        python=python,
        minor=minor,
        changes=compare(old, now) if old is not None else Changes(added=tuple(sorted(now.items()))),
        smoke_status=str(doc.get("status")),
        cleaned=tuple(cleaned),
        converted=converted,
        compared="yes" if old is not None else ("old-venv-broken" if had_old else "no-old-venv"),
        kernel=kernel,
    )
