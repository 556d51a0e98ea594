"""envlock capture -r: the freeze path's left-out reporting and resolver retry loop.

What ``run_freeze`` in envlock.commands.capture hands on once the freeze is
sorted: the capture as a command line to run again (``_rerun``), the error for a
--python or --os-info the pins contradict (``_contradicted``), the lock rounds
that leave out dependents of left-out lines (``_lock_rounds``, at most
``ROUNDS`` resolver runs), the count of freeze lines locked at their own
version and those locked at another (``_locked_lines``, ``_differs``), and the
printing of a partial capture (``_print_partial``).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from envlock.door import redact
from envlock.errors import NoResolution, SdistDoesNotBuild, StubSdists, UsageError

if TYPE_CHECKING:
    from envlock.bundle.folder import LockedFolder, LockRequest
    from envlock.bundle.left_out import LeftOut
    from envlock.lock.freeze import Installed
    from envlock.model import Lock, Resolution
    from envlock.venv.capture import Captured
    from envlock.venv.leftout import Commands, PythonChoice


def _rerun(args: argparse.Namespace) -> Callable[[Sequence[str]], str]:
    """The capture as given, as a command line that takes ``more`` arguments too."""
    base = ["envlock", "capture", "-r", args.freeze]
    for flag, value in (
        ("--os-info", args.os_info),
        ("--python", args.python),
        ("--cuda-source", args.cuda_source),
        ("--index-url", args.index_url),
    ):
        if value:
            base += [flag, value]
    if args.resolver != "uv":
        base += ["--resolver", args.resolver]
    if args.only_binary:
        base.append("--only-binary")
    for pin in args.with_:
        base += ["--with", pin]
    for value in args.indexes:
        base += ["--index", redact(value)]
    for value in args.routes:
        base += ["--route", value]
    base += ["-o", args.output]

    def rerun(more: Sequence[str]) -> str:
        return shlex.join([*base, *more])

    return rerun


def _differs(rows: Sequence[Installed], locked: Lock, left: Sequence[LeftOut]) -> list[str]:
    """The freeze lines the lock holds at another version (or not at all), not left out."""
    from packaging.utils import canonicalize_name

    have = {p.name: p.version for p in locked.packages}
    out_lines = {item.line for item in left}
    out = []
    for r in rows:
        if not r.name or r.version is None or r.describe() in out_lines:
            continue
        name = canonicalize_name(r.name)
        got = have.get(name)
        if got is None or not _same(got, r.version):
            out.append(f"{r.describe()}: locked {got or 'not at all'}")
    return out


def _same(a: str, b: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _locked_lines(rows: Sequence[Installed], locked: Lock, left: Sequence[LeftOut]) -> int:
    """The freeze lines the lock holds at the line's own version."""
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version

    have = {p.name: p.version for p in locked.packages}
    out_lines = {item.line for item in left}
    n = 0
    for r in rows:
        if not r.name or r.version is None or r.describe() in out_lines:
            continue
        got = have.get(canonicalize_name(r.name))
        try:
            if got is not None and Version(got) == Version(r.version):
                n += 1
        except InvalidVersion:
            continue
    return n


def _print_partial(
    args: argparse.Namespace,
    captured: Captured,
    written: LockedFolder,
    notes: list[str],
    choice: PythonChoice,
    left: Sequence[LeftOut],
    total: int,
    locked_n: int,
    differs: Sequence[str],
) -> None:
    from envlock.bundle import left_out as lofile
    from envlock.commands.lock import _print_lock

    locked = {p.name: p.version for p in written.lock.packages}
    line = lofile.summary(locked_n, total, left, other=len(differs))
    if args.json:
        from envlock.output import emit_json

        emit_json(
            {
                "captured": captured.to_dict(),
                "origin": None,
                "python": {
                    "version": choice.python,
                    "how": choice.how,
                    "deciding": list(choice.deciding),
                },
                "dir": str(written.folder),
                "lock_digest": f"sha256:{written.digest}",
                "gpu": written.lock.gpu.to_dict() if written.lock.gpu else None,
                "packages": [{"name": n, "version": v} for n, v in sorted(locked.items())],
                "differs": list(differs),
                "left_out": [item.to_dict() for item in left],
                "lines": total,
                "locked": locked_n,
                "summary": line,
                "notes": notes,
                "files": list(written.files),
            }
        )
        return
    for note in notes:
        sys.stderr.write(f"envlock: note: {note}\n")
    for problem in written.lock.gpu.problems if written.lock.gpu else ():
        sys.stderr.write(f"envlock: warning: {problem}\n")
    _print_lock(argparse.Namespace(json=False), written)
    write = sys.stdout.write
    write(f"{choice.how}\n")
    for why in choice.deciding:
        write(f"  {why}\n")
    if differs:
        write("locked at other versions than the freeze's:\n")
        for text in differs:
            write(f"  {text}\n")
    if left:
        write(f"left out ({len(left)}; recorded in {written.folder / lofile.FILE}):\n")
        for item in left:
            write(f"  {item.describe()}\n")
            write(
                f"    take it in: {item.command}\n"
                if item.command
                else "    take it in: no command yet\n"
            )
    write(line + "\n")


def _contradicted(
    args: argparse.Namespace,
    python: str,
    against: Sequence[tuple[str, str]],
    lines: dict[str, str],
    fits: PythonChoice,
) -> UsageError:
    """A --python (or --os-info) that the freeze's own pins exclude, each line named."""
    from envlock.venv.leftout import pin_of

    shown = "\n".join(
        f"  {lines.get(pin_of(pin)[0], pin)}: Requires-Python {spec}" for pin, spec in against[:20]
    )
    if len(against) > 20:
        shown += f"\n  ... and {len(against) - 20} more"
    flag = f"--python {python}" if args.python else f"--os-info {args.os_info} (Python {python})"
    again = _rerun(args)(()).replace(f" --python {python}", "")
    return UsageError(
        f"{flag} contradicts {len(against)} line(s) of {args.freeze}, whose Requires-Python "
        f"excludes Python {python}:\n{shown}",
        hint=f"capture a freeze made under Python {python}, or let the pins choose "
        f"({fits.how.split(':', 1)[0]}): {again}",
    )


ROUNDS = 8  # the most resolver runs one capture makes while it leaves out dependents


def _lock_rounds(
    request: LockRequest,
    resolution: Resolution,
    keep: list[str],
    left: list[LeftOut],
    lines: dict[str, str],
    commands: Commands,
) -> LockedFolder:
    """Lock ``keep``; where the resolver says a kept pin needs a distribution that
    was left out (it has no wheel here), that pin is left out too, named with
    what it needs, and the rest is locked again (at most ROUNDS runs)."""
    import re
    from dataclasses import replace

    from packaging.utils import canonicalize_name

    from envlock.bundle.folder import lock_folder
    from envlock.bundle.left_out import LeftOut
    from envlock.venv.leftout import pin_of

    for _ in range(ROUNDS):
        try:
            return lock_folder(replace(request, with_requirements=tuple(keep)), resolution)
        except StubSdists as e:
            named = {canonicalize_name(n) for n, _ in e.pins}
            gone = [p for p in keep if pin_of(p)[0] in named]
            if not gone:
                raise
            for pin in gone:
                keep.remove(pin)
                left.append(
                    LeftOut(
                        lines.get(pin_of(pin)[0], pin),
                        pin_of(pin)[0],
                        "other-index",
                        "the index has only a stub source archive of it (wheel-stub), whose "
                        "build downloads the wheel from NVIDIA's index; add that index with "
                        "--index-url URL (several indexes at once: #41's next part)",
                        None,
                    )
                )
        except SdistDoesNotBuild as e:
            failed = next((p for p in keep if pin_of(p)[0] == canonicalize_name(e.name)), None)
            if failed is None:
                raise
            keep.remove(failed)
            pin = failed
            left.append(
                LeftOut(
                    lines.get(pin_of(pin)[0], pin),
                    pin_of(pin)[0],
                    "no-distribution",
                    f"no wheel for this Python/platform, and its source archive does not "
                    f"build here ({e.cause}); pip builds it where its build needs are",
                    commands.pip_install(pin),
                )
            )
        except NoResolution as e:
            said = e.message
            required = {f"{pin_of(p)[0]}=={pin_of(p)[1]}": p for p in keep}
            culprits = [
                required[f"{m.group(1).lower()}=={m.group(2)}"]
                for m in re.finditer(r"you require ([A-Za-z0-9._-]+)==([^\s,;]+)", said)
                if f"{m.group(1).lower()}=={m.group(2)}" in required
            ]
            gone = sorted({item.name for item in left if item.name and item.name in said})
            needs = re.findall(r"depends on ([A-Za-z0-9._\[\]-]+[^\s,]*)", said)
            if not culprits:
                raise
            for pin in dict.fromkeys(culprits):
                keep.remove(pin)
                what = needs[-1] if needs else ", ".join(gone) or "a distribution"
                left.append(
                    LeftOut(
                        lines.get(pin_of(pin)[0], pin),
                        pin_of(pin)[0],
                        "no-distribution",
                        f"it depends on {what}, which has no wheel for this Python/platform "
                        "(left out above); pip installs its own wheel without it",
                        commands.pip_install(pin),
                    )
                )
    raise NoResolution(
        f"the resolver still fails after {ROUNDS} runs that left out dependents of left-out lines",
        hint="capture with --strict to see every line left out, then trim the freeze",
    )
