"""What both restore modes share: the request, and the hashed install into an
interpreter (a new venv's, or the one ``--in-place`` syncs).

Below ``envlock.venv.restore`` (the new-venv switch) and
``envlock.venv.inplace``/``envlock.venv.kernel``, which all import it.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envlock.errors import EnvironmentFailure
from envlock.model import Lock

if TYPE_CHECKING:
    from envlock.model import Lock

INSTALL_TIMEOUT = 3600


@dataclass(frozen=True)
class RestoreRequest:
    bundle: Path
    venv: Path
    base_python: str | None = None  # the interpreter a new venv is made with
    wheelhouse: Path | None = None
    offline: bool = False
    allow_cpu: bool = False
    index_url: str | None = None
    in_place: bool = False  # sync the lock into --venv's interpreter (envlock.venv.inplace)
    exact: bool = False  # in place: also remove what the lock does not name
    undo: bool = False  # put back what the newest in-place sync replaced
    undo_id: str | None = None
    kernel: str | None = None  # register the new venv as this Jupyter kernel
    kernel_prefix: Path | None = None  # ipykernel install --prefix (default --user)


def requirement_lines(lock: Lock, names: set[str], wheelhouse: Path | None = None) -> str:
    """``name==version --hash=...`` lines of the locked ``names`` (every file's sha256);
    a package routed to an extra index (``--route``) as ``name @ URL --hash``, the
    file it was locked from: its URL, or with ``wheelhouse`` the copy the wheelhouse
    downloaded from that URL (hash-checked)."""
    from envlock.lock.requirements import routed_wheel

    lines = []
    for p in lock.packages:
        if p.name not in names:
            continue
        if p.index and p.wheels:
            wheel = routed_wheel(p)
            url = (wheelhouse / wheel.filename).absolute().as_uri() if wheelhouse else wheel.url
            lines.append(f"{p.name} @ {url} --hash=sha256:{wheel.sha256}\n")
            continue
        hashes = " ".join(f"--hash=sha256:{h}" for h in p.hashes)  # a wheel's or the sdist's
        lines.append(f"{p.name}=={p.version} {hashes}\n")
    return "".join(lines)


def run_step(argv: list[str], doing: str, timeout: float, env: dict[str, str] | None = None) -> str:
    try:
        out = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        raise EnvironmentFailure(f"{doing}: no answer after {timeout:g} s") from None
    except OSError as e:
        raise EnvironmentFailure(f"{doing}: cannot run {argv[0]}: {e.strerror or e}") from None
    if out.returncode != 0:
        tail = "\n".join((out.stderr or out.stdout).strip().splitlines()[-15:])
        raise EnvironmentFailure(f"{doing} failed (exit {out.returncode}):\n{tail}")
    return out.stdout


def install_argv(
    req: RestoreRequest,
    python: Path,
    requirements: Path | None = None,
    build: Path | None = None,
) -> list[str]:
    """The hashed install of the bundle's requirements.txt (or ``requirements``, some
    of its lines) into ``python``'s environment; ``build``: the build constraints
    every source archive is built with (``build_constraints_file``)."""
    from envlock.lock.uv import uv_bin

    reqs = requirements or req.bundle / "requirements.txt"
    argv = [uv_bin(), "pip", "install", "--python", str(python), "--require-hashes"]
    argv += ["--no-deps", "--no-config", "-r", str(reqs)]
    if build is not None:
        argv += ["--build-constraints", str(build)]
    if req.wheelhouse is not None:
        return [*argv, "--no-index", "--offline", "--find-links", str(req.wheelhouse)]
    from envlock.index.config import index_url

    argv += ["--index-url", index_url(req.index_url)]
    return [*argv, "--offline"] if req.offline else argv


def restore_command(
    req: RestoreRequest,
    *,
    allow_cpu: bool | None = None,
    wheelhouse: Path | None = None,
    offline: bool | None = None,
) -> str:
    """This restore as a command to paste: the same DIR and --venv (restore's own
    default spelled out), the same flags, with the ones given changed."""
    argv = ["envlock", "restore", str(req.bundle), "--venv", str(req.venv)]
    if req.in_place:
        argv.append("--in-place")
        if req.exact:
            argv.append("--exact")
    if req.base_python and not req.in_place:
        argv += ["--base-python", req.base_python]
    wh = wheelhouse if wheelhouse is not None else req.wheelhouse
    if wh is not None:
        argv += ["--wheelhouse", str(wh)]
    if req.offline if offline is None else offline:
        argv.append("--offline")
    if req.index_url and wh is None:
        argv += ["--index-url", req.index_url]
    if req.allow_cpu if allow_cpu is None else allow_cpu:
        argv.append("--allow-cpu")
    if req.kernel and not req.in_place:
        argv += ["--kernel", req.kernel]
        if req.kernel_prefix:
            argv += ["--kernel-prefix", str(req.kernel_prefix)]
    return shlex.join(argv)


def wheelhouse_command(bundle: Path, wheelhouse: Path) -> str:
    """The command that fills ``wheelhouse`` with every file of ``bundle``'s lock (its
    wheels, its sdists and the wheels of their build requirements)."""
    return shlex.join(["envlock", "wheelhouse", str(bundle), "-o", str(wheelhouse)])


def default_venv(bundle: Path, *, in_place: bool = False, kernel: bool = False) -> tuple[Path, str]:
    """restore's ``--venv`` when none is given, and why (for people): the environment
    the bundle was captured from (``DIR/captured.json``, on the machine it names), else
    the venv bootstrap.sh makes, ``DIR/.venv``. A capture of an interpreter outside a
    venv is the default only for ``--in-place`` (a new venv cannot replace it). With
    ``kernel`` (``--kernel NAME``: a new kernel beside the running one) never the
    captured venv, which may be the running kernel's own: ``DIR/.venv``."""
    from envlock.bundle import origin

    found = origin.read(bundle)
    record = bundle / origin.FILE
    if kernel:
        why = "the venv bootstrap.sh makes"
        if found is not None and found.here() and found.venv:
            why += (
                f" (not {found.venv}, which {bundle} was captured from: a running kernel may "
                "use it; --kernel registers a new venv beside it)"
            )
        return bundle / ".venv", why
    if found is not None and found.here():
        if found.venv:
            return Path(found.venv), f"the venv {bundle} was captured from ({record})"
        if in_place:
            return Path(found.interpreter), f"the interpreter {bundle} was captured from ({record})"
        into = restore_command(RestoreRequest(bundle, Path(found.interpreter), in_place=True))
        return bundle / ".venv", (
            f"the venv bootstrap.sh makes; {bundle} was captured from {found.interpreter}, "
            f"outside a venv (to restore into it: {into})"
        )
    ignored = origin.ignored(bundle, found)
    return bundle / ".venv", "the venv bootstrap.sh makes" + (f" ({ignored})" if ignored else "")


@contextlib.contextmanager
def build_constraints_file(lock: Lock, names: Iterable[str] | None = None) -> Iterator[Path | None]:
    """The lock's build constraints as a temporary file, written from the lock as
    read and checked (not the bundle's build-constraints.txt, which is only a copy
    for people and pip), or None when none of ``names`` (default: every locked
    package) is built from source."""
    from envlock.lock.sdists import built_from_source

    wanted = set(built_from_source(lock))
    if names is not None:
        wanted &= set(names)
    if not wanted or not lock.build_constraints:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="envlock-build-") as tmp:
        path = Path(tmp, "build-constraints.txt")
        path.write_text("".join(c + "\n" for c in lock.build_constraints), encoding="utf-8")
        yield path


def from_source_line(lock: Lock, names: Iterable[str] | None = None) -> str | None:
    """What restore says before it builds source archives, or None."""
    from envlock.lock.sdists import built_from_source

    built = [n for n in built_from_source(lock) if names is None or n in set(names)]
    if not built:
        return None
    return (
        f"building {', '.join(built)} from source (no wheel fits; locked by sha256, "
        f"built with the {len(lock.build_constraints)} build requirements the lock pins)"
    )
