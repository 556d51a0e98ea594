"""Doctor's findings on the venv's interpreter itself: a base interpreter that no
longer exists (pyvenv.cfg's ``home``), and the steps that make the lock's Python
environment again (moved out of ``envlock.doctor.findings``, which judges the rest)."""

from __future__ import annotations

import shlex

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from envlock.doctor.advice import (
    HANDFUL,
    Context,
    Finding,
    Way,
    choice,
    do,
    restore_command,
    run,
)

# Installed by venv/pip themselves, never part of a lock.
TOOLING = frozenset({"pip", "setuptools", "wheel", "distribute"})


def _restore_steps(ctx: Context, want: str) -> tuple[tuple[str, str], ...]:
    """The restore that makes a Python ``want`` environment: in a notebook a new
    venv registered as a kernel (the running kernel's Python cannot change in
    place), then the switch to it; else the restore of the inspected venv."""
    if not ctx.notebook:
        return (run(restore_command(ctx)),)
    from pathlib import Path

    name = f"{Path(ctx.lock_dir or 'env').name}-py{want}"
    # ~ unquoted: %envlock reads it as the home folder, as a shell would
    command = (
        f"envlock restore {shlex.quote(ctx.lock_dir or 'DIR')} --venv ~/envs/{shlex.quote(name)} "
        f"--kernel {shlex.quote(name)}" + (" --allow-cpu" if ctx.allow_cpu else "")
    )
    return (
        run(command),
        do(f"switch this notebook to the kernel {name} (Kernel > Change Kernel) and run it again"),
    )


def _pyvenv(venv: str) -> dict[str, str]:
    """pyvenv.cfg's keys (home, version or uv's version_info), read as text."""
    from pathlib import Path

    from envlock.errors import EnvlockError
    from envlock.readers import read_text

    out: dict[str, str] = {}
    try:
        text = read_text(Path(venv) / "pyvenv.cfg", limit=64 * 1024)
    except EnvlockError:  # unreadable or not UTF-8: the finding says less, no more
        return out
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip().lower()] = value.strip()
    return out


def _top_level(venv: str) -> list[str]:
    """The distributions in the venv's site-packages that no other one there
    requires (pip list --not-required), as name==version, read from their
    metadata files: the interpreter that could run pip is gone."""
    from importlib.metadata import distributions
    from pathlib import Path

    dists: dict[str, tuple[str, list[str]]] = {}
    for site in sorted(Path(venv).glob("lib/python3*/site-packages")):
        for d in distributions(path=[str(site)]):
            name = canonicalize_name(d.metadata["Name"] or "")
            if name and name not in TOOLING:
                dists.setdefault(name, (d.version, list(d.requires or [])))
    required: set[str] = set()
    for _, requires in dists.values():
        for line in requires:
            try:
                required.add(canonicalize_name(Requirement(line).name))
            except InvalidRequirement:
                continue
    return [f"{n}=={v}" for n, (v, _) in sorted(dists.items()) if n not in required]


def interpreter_gone(ctx: Context, link: str, points_to: str) -> Finding:
    """The venv's interpreter is a link to a Python that no longer exists: named by
    the path pyvenv.cfg's home gives, with the command that makes the venv again
    (restore from the bundle, else a new venv of that Python and pip's line)."""
    import os

    venv = ctx.venv or ""
    cfg = _pyvenv(venv) if venv else {}
    home = cfg.get("home", "")
    version = cfg.get("version") or cfg.get("version_info") or ""
    minor = ".".join(version.split(".")[:2]) if version else ""
    made = ""
    if home:
        state = "gone too" if not os.path.isdir(home) else "still there"
        made = f"; pyvenv.cfg says it was made from {home} (Python {version or '?'}), {state}"
    cause = (
        f"the environment's interpreter {link} is a link to {points_to}, which no longer "
        f"exists{made} (the platform removed or moved that Python): nothing in the venv can run"
    )
    if ctx.lock_dir:
        return Finding("python", "FAIL", cause, restore_command(ctx))
    from envlock.errors import UsageError
    from envlock.venv.restore import find_python

    python, manual = f"python{minor}" if minor else "python3", False
    if minor:
        try:  # as restore finds it: PATH, pyenv's versions, uv's interpreters
            python = find_python(minor, None)
        except UsageError as e:
            cause += f"; {e.message}: {e.hint}"
            manual = True
    pins = _top_level(venv) if venv else []
    # venv --clear refuses a link: the folder it names is made again (the link stays)
    real = os.path.realpath(venv) if venv else venv
    command = shlex.join([python, "-m", "venv", "--clear", real])
    if len(pins) > HANDFUL:  # more than a handful: the pins go through a file
        return _remade_from_file(cause, python, venv, real, minor if manual else "")
    if pins:  # what was installed at the top (pip pulls what they require)
        command += " && " + shlex.join([f"{venv}/bin/python", "-m", "pip", "install", *pins])
    if manual:
        command = f"install Python {minor} (see above), then run: {command}"
    return Finding("python", "FAIL", cause, command, manual=manual)


# run by the new Python on the old site-packages before the venv is cleared: every
# distribution there as NAME==VERSION (standard library only, Python 3.8 or newer)
_LIST_DISTRIBUTIONS = (
    "import importlib.metadata as m, sys; "
    'd = {x.metadata["Name"]: x.version for x in m.distributions(path=[sys.argv[1]]) '
    'if (x.metadata["Name"] or "pip").lower() not in ("pip", "setuptools", "wheel")}; '
    'print("\\n".join(k + "==" + v for k, v in sorted(d.items())))'
)


def _remade_from_file(cause: str, python: str, venv: str, real: str, missing: str) -> Finding:
    """The venv made again when it held more than a handful of distributions: the
    new Python lists them from the old site-packages into a file beside the venv,
    makes the venv again, and pip installs the file (three steps, no long line)."""
    from pathlib import Path

    sites = sorted(Path(venv).glob("lib/python3*/site-packages"))
    site = str(sites[0]) if sites else f"{venv}/lib/python3/site-packages"
    listed = f"{real}.distributions.txt"
    steps = [
        run(f"{shlex.join([python, '-c', _LIST_DISTRIBUTIONS, site])} > {shlex.quote(listed)}"),
        run(shlex.join([python, "-m", "venv", "--clear", real])),
        run(shlex.join([f"{venv}/bin/python", "-m", "pip", "install", "-r", listed])),
    ]
    if missing:
        steps.insert(0, do(f"install Python {missing} (see above)"))
    return choice("python", "FAIL", cause, [Way("", tuple(steps))])


# the labels of the two ways out of a package finding (the same on every package
# row, so the fix list says them once, the second way with every package's command)
