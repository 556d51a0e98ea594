"""``envlock restore DIR --kernel NAME``: the restored venv as a Jupyter kernel.

The kernelspec is written by the venv's own ipykernel (``VENV/bin/python -m
ipykernel install --user --name NAME --display-name ...``, or ``--prefix``),
so it is what Jupyter itself would write: argv ``[VENV/bin/python, -m,
ipykernel_launcher, -f, {connection_file}]`` with VENV the link restore
switches, so the kernel follows later restores. ipykernel must be in the lock
(a kernel needs it, and restore installs only the lock): else the refusal
says how to lock it, as a command rebuilt from the bundle's recorded input.
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from envlock.errors import EnvironmentFailure, EnvlockError, UsageError

if TYPE_CHECKING:
    from envlock.model import Lock
    from envlock.venv.install import RestoreRequest

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_INSTALLED = re.compile(r"Installed kernelspec (\S+) in (.+)$", re.MULTILINE)


def check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise UsageError(
            f"--kernel {name!r}: a kernel name is letters, digits, '.', '_' and '-' "
            "(as Jupyter names kernels), at most 64 characters",
            hint="for example --kernel tf215",
        )


def newest_ipykernel(lock: Lock, index: str | None) -> str | None:
    """The newest final ipykernel release the index has a wheel of for the lock's target."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import Version

    from envlock.index import http
    from envlock.index.config import index_url
    from envlock.index.pep691 import project_files
    from envlock.lock.pylock import target_of

    try:
        url = index_url(index)
        files = project_files(http.session(), url, "ipykernel")
    except EnvlockError:
        return None
    target = target_of(lock)
    best: Version | None = None
    for f in files or []:
        if f.yanked or not f.filename.endswith(".whl") or not target.wheel_ok(f.filename):
            continue
        try:
            version = parse_wheel_filename(f.filename)[1]
        except InvalidWheelFilename:
            continue
        if not version.is_prerelease and (best is None or version > best):
            best = version
    return str(best) if best is not None else None


def lock_with_ipykernel(lock: Lock, bundle: Path, version: str | None) -> str:
    """The bundle's own lock command (its recorded input) with ipykernel pinned too,
    into the same folder (the other locked versions are kept as they are)."""
    from envlock.lock.pylock import regenerate_command

    pin = f"ipykernel=={version}" if version else "ipykernel"
    argv = shlex.split(regenerate_command(lock, str(bundle)))
    out = argv.index("-o")
    return shlex.join([*argv[:out], "--with", pin, *argv[out:]])


def require_ipykernel(
    req: RestoreRequest, lock: Lock, current: dict[str, str] | None, then: str
) -> None:
    """ipykernel is in the lock, else a UsageError (exit 2) whose hint locks it and
    runs ``then`` (this restore); ``current``: what the target venv has now."""
    if any(p.name == "ipykernel" for p in lock.packages):
        return
    version = (current or {}).get("ipykernel") or newest_ipykernel(lock, req.index_url)
    raise UsageError(
        f"--kernel {req.kernel}: ipykernel is not in the lock of {req.bundle}, and a "
        "Jupyter kernel needs it (restore installs only what the lock holds); nothing "
        "was built",
        hint="lock it into the bundle, then restore: "
        f"{lock_with_ipykernel(lock, req.bundle, version)} && {then}",
    )


class KernelSpec(TypedDict):
    """The kernel restore --kernel registered: its name, folder, and what its
    kernel.json says (as ipykernel wrote it: read, not checked)."""

    name: str
    path: str
    argv: object
    display_name: object


_DATA_DIR = "from jupyter_core.paths import jupyter_data_dir; print(jupyter_data_dir())"
MAX_KERNEL_JSON = 1024 * 1024  # ipykernel writes a few hundred bytes


def kernels_folder(req: RestoreRequest, python: Path) -> Path | None:
    """The ``kernels`` folder ipykernel install will write into: PREFIX's with
    --prefix, else the one the venv's own jupyter_core names (JUPYTER_DATA_DIR,
    the XDG data home); None when the venv cannot say."""
    import subprocess

    if req.kernel_prefix is not None:
        return Path(req.kernel_prefix) / "share" / "jupyter" / "kernels"
    try:
        out = subprocess.run(
            [str(python), "-c", _DATA_DIR], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines or not os.path.isabs(lines[-1]):
        return None
    return Path(lines[-1]) / "kernels"


def refuse_links(kernels: Path, name: str) -> None:
    """A kernelspec folder is created in a place others may share (a --prefix
    environment, a data home): a symbolic link at ``kernels`` or ``kernels/NAME``
    would have ipykernel replace (rmtree, then copy into) whatever it points to.
    Such a link is exit 3 naming it, before anything is written."""
    for path in (kernels.parent, kernels, kernels / name):
        if path.is_symlink():
            raise EnvironmentFailure(
                f"--kernel {name}: {path} is a symbolic link (to {os.readlink(path)}); "
                "envlock does not install a kernelspec through it, nothing was written",
                hint=f"remove the link (rm {shlex.quote(str(path))}), or give --kernel-prefix "
                "another folder",
            )


def install_kernel(req: RestoreRequest, venv: Path, display_name: str) -> KernelSpec:
    """Register ``venv`` as kernel ``req.kernel`` with its own ipykernel; the spec.
    Neither the kernelspec folder nor its kernel.json is followed through a link."""
    from envlock.readers import read_json
    from envlock.venv.install import run_step

    assert req.kernel is not None
    python = venv / "bin" / "python"
    kernels = kernels_folder(req, python)
    if kernels is not None:
        refuse_links(kernels, req.kernel)
    argv = [str(python), "-m", "ipykernel", "install", "--name", req.kernel]
    argv += ["--display-name", display_name]
    argv += ["--prefix", str(req.kernel_prefix)] if req.kernel_prefix else ["--user"]
    # ipykernel writes the spec into a mkdtemp folder it leaves behind: one of ours
    with tempfile.TemporaryDirectory(prefix="envlock-kernel-") as tmp:
        env = {**os.environ, "TMPDIR": tmp}
        out = run_step(argv, f"registering the kernel {req.kernel}", 300, env)
    m = _INSTALLED.search(out)
    if m is None:
        raise EnvironmentFailure(
            f"ipykernel install gave no kernelspec path: {out.strip()[-300:]}",
            hint=f"run it yourself: {shlex.join(argv)}",
        )
    folder = Path(m.group(2).strip())
    refuse_links(folder.parent, folder.name)
    spec = read_json(
        folder / "kernel.json",
        "the kernelspec",
        limit=MAX_KERNEL_JSON,
        follow=False,
        error=EnvironmentFailure,
        hint=f"run it yourself: {shlex.join(argv)}",
    )
    if not isinstance(spec, dict):
        raise EnvironmentFailure(f"{folder / 'kernel.json'}: not a JSON object")
    return {
        "name": req.kernel,
        "path": str(folder),
        "argv": spec.get("argv"),
        "display_name": spec.get("display_name"),
    }
