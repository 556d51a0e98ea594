"""``envlock capture -r``: the capture as a command to run again, the error for a
Python the pins contradict, and the resolver rounds that leave out dependents.

``rerun(request)`` is the capture as given, as a command line that takes more
arguments (each left-out line's "take it in" command); ``contradicted`` is the
error for a --python or --os-info the freeze's own pins exclude; ``lock_rounds``
locks the kept pins, and where the resolver says a kept pin needs a distribution
that was left out (or its source archive is a stub or does not build here),
leaves that pin out too and locks again (at most ``ROUNDS`` resolver runs).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from envlock.door import redact
from envlock.errors import NoResolution, SdistDoesNotBuild, StubSdists, UsageError

if TYPE_CHECKING:
    from envlock.bundle.folder import LockedFolder, LockRequest
    from envlock.bundle.left_out import LeftOut
    from envlock.capture.result import CaptureRequest
    from envlock.model import Resolution
    from envlock.venv.leftout import Commands, PythonChoice


def rerun(request: CaptureRequest) -> Callable[[Sequence[str]], str]:
    """The capture as given, as a command line that takes ``more`` arguments too."""
    base = ["envlock", "capture", "-r", str(request.freeze)]
    for flag, value in (
        ("--os-info", request.os_info),
        ("--python", request.python),
        ("--cuda-source", request.cuda_source),
        ("--index-url", request.index_url),
    ):
        if value:
            base += [flag, value]
    if request.resolver != "uv":
        base += ["--resolver", request.resolver]
    if request.only_binary:
        base.append("--only-binary")
    for pin in request.with_:
        base += ["--with", pin]
    for value in request.indexes:
        base += ["--index", redact(value)]
    for value in request.routes:
        base += ["--route", value]
    base += ["-o", request.output]

    def again(more: Sequence[str]) -> str:
        return shlex.join([*base, *more])

    return again


def contradicted(
    request: CaptureRequest,
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
    flag = (
        f"--python {python}" if request.python else f"--os-info {request.os_info} (Python {python})"
    )
    again = rerun(request)(()).replace(f" --python {python}", "")
    return UsageError(
        f"{flag} contradicts {len(against)} line(s) of {request.freeze}, whose Requires-Python "
        f"excludes Python {python}:\n{shown}",
        hint=f"capture a freeze made under Python {python}, or let the pins choose "
        f"({fits.how.split(':', 1)[0]}): {again}",
    )


ROUNDS = 8  # the most resolver runs one capture makes while it leaves out dependents


def lock_rounds(
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
    from envlock.venv.sdist_check import stub_detail

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
                        stub_detail(pin_of(pin)[0]),
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
