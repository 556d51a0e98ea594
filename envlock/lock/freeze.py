"""Requirement files that are a ``pip freeze`` of a working environment.

A freeze names the framework itself and, in a venv made with
``tensorflow[and-cuda]``, the nvidia-* CUDA wheels. envlock takes both from
the resolution instead:

- a line naming the framework (``tensorflow``, ``tensorflow[and-cuda]``, or one
  of its other distributions: ``tensorflow-cpu``, ``tensorflow-gpu``,
  ``tensorflow-intel``, ``tensorflow-macos``) must allow the resolved release;
  it is then dropped (the SPEC states the release), else the conflict is named
  (exit 2);
- a line naming an nvidia CUDA wheel (``nvidia-*-cu11``/``-cu12``/... and the
  other ``nvidia-*`` runtime wheels the and-cuda extras pull in) is dropped: the
  lock's CUDA source decides them (``system``: none, the base image carries
  CUDA; ``pip``: the release's own and-cuda pins).

``installed_line(line)`` reads one line of a freeze as ``envlock capture -r``
takes it: ``name==version`` (or ``===``), ``name @ URL`` (a local file, a VCS
checkout, a URL) and ``-e URL-or-path`` (an editable install), each as an
``Installed``; ``left_out_why`` says why capture leaves the direct installs out
of the lock.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from envlock.errors import UsageError

# the framework's other distributions on the index (same version numbers)
_ALIASES = {
    "tensorflow": ("tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel", "tensorflow-macos"),
}
# nvidia CUDA wheels: nvidia-cublas-cu12, nvidia-cudnn-cu11, nvidia-nccl-cu12, nvidia-nvjitlink-cu12
_NVIDIA_CUDA = re.compile(r"^nvidia-[a-z0-9-]+-cu\d+$")


@dataclass(frozen=True)
class FrozenLines:
    """The lines of a requirement file that the lock pins, and what was dropped and why."""

    kept: tuple[str, ...]
    notes: tuple[str, ...]


def framework_names(framework: str) -> frozenset[str]:
    fw = canonicalize_name(framework)
    return frozenset((fw, *_ALIASES.get(fw, ())))


def is_cuda_wheel(name: str) -> bool:
    return bool(_NVIDIA_CUDA.match(canonicalize_name(name)))


def split_frozen(
    lines: Sequence[str], *, framework: str, version: str, cuda_source: str, origin: str
) -> FrozenLines:
    """``lines`` (valid requirements) without those the resolution decides.

    Raises UsageError (exit 2) when a framework line excludes the resolved release.
    """
    names = framework_names(framework)
    kept: list[str] = []
    notes: list[str] = []
    cuda: list[str] = []
    for line in lines:
        req = Requirement(line)
        name = canonicalize_name(req.name)
        if name in names:
            if not req.specifier.contains(Version(version), prereleases=True):
                raise UsageError(
                    f"{origin}: {line!r} conflicts with SPEC, which resolved to "
                    f"{canonicalize_name(framework)} {version}",
                    hint=f"make them agree: lock '{canonicalize_name(framework)}"
                    f"{req.specifier}' or drop the {req.name} line from the file",
                )
            notes.append(
                f"{origin}: {line} agrees with SPEC ({framework} {version}); "
                "the release comes from SPEC"
            )
            continue
        if is_cuda_wheel(name):
            cuda.append(name)
            continue
        kept.append(line)
    if cuda:
        decides = "the release's and-cuda pins" if cuda_source == "pip" else "the base image's CUDA"
        notes.append(
            f"{origin}: {len(cuda)} nvidia CUDA wheel(s) left out ({', '.join(cuda)}): "
            f"CUDA source {cuda_source} decides them ({decides})"
        )
    return FrozenLines(tuple(kept), tuple(notes))


_VCS = ("git+", "hg+", "svn+", "bzr+")


@dataclass(frozen=True)
class Installed:
    """One installed distribution as capture reads it (from the probe or a freeze line)."""

    name: str  # as installed; "" when a freeze line names none (-e /path/to/checkout)
    version: str | None  # None when a freeze line names none (pkg @ URL of a folder)
    direct: str | None = None  # PEP 610 kind: "editable", "folder", "vcs", "url"; None: an index
    url: str | None = None  # where a direct install came from
    line: str | None = None  # the freeze line as written
    location: str | None = None  # the site folder it is installed in (the probe's)

    def describe(self) -> str:
        """How a note names it: the freeze line, else "name version (url)"."""
        if self.line:
            return self.line
        said = f"{self.name} {self.version}" if self.version else self.name
        return f"{said} ({self.url})" if self.url else said


def left_out_why(item: Installed) -> str | None:
    """Why capture leaves a direct install out of the lock; None for an index install.

    A local checkout, folder or file is on no index. A VCS checkout or a URL is
    left out too: the index's name==version (when it has one) is another build
    than the one installed, and a lock that silently swaps builds is worse than
    one that says what it could not pin.
    """
    if item.direct is None:
        return None
    local = (item.url or "").startswith("file:") or not urlsplit(item.url or "").scheme
    if item.direct == "editable":
        if (item.url or "").startswith(_VCS):
            return "an editable VCS checkout: no index serves that build"
        return "an editable install of a local checkout: no index serves it"
    if item.direct == "folder":
        return "installed from a local folder: no index serves it"
    if item.direct == "vcs":
        return "installed from a VCS checkout: the index's build of that version, if any, differs"
    if local:
        return "installed from a local file: no index serves it"
    return "installed from a URL: the index's build of that version, if any, may differ"


def _version_of_file(url: str) -> str | None:
    """The version a wheel's or an sdist's file name states (pkg-1.2-py3-none-any.whl)."""
    name = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    try:
        if name.endswith(".whl"):
            return str(parse_wheel_filename(name)[1])
        return str(parse_sdist_filename(name)[1])
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None


def _egg(url: str) -> str:
    """The name a ``#egg=name`` fragment gives, else ""."""
    for part in urlsplit(url).fragment.split("&"):
        key, _, value = part.partition("=")
        if key == "egg" and value:
            return canonicalize_name(value.split("[", 1)[0])
    return ""


def installed_line(line: str, origin: str) -> Installed:
    """One line of a ``pip freeze`` as capture takes it.

    Raises UsageError (exit 2) for a line that is no requirement, one with a
    version range (a freeze pins), and options other than ``-e``.
    """
    if line.startswith("-"):
        option, _, rest = line.partition(" ")
        if "=" in option and option.startswith("--"):
            option, _, rest = line.partition("=")
        target = rest.strip()
        if option not in ("-e", "--editable") or not target:
            raise UsageError(
                f"{origin}: {line!r}: {option} is not a line of a pip freeze",
                hint="capture reads a pip freeze (name==version, name @ URL and -e lines); "
                "remove that line (give an index with --index-url)",
            )
        return Installed(_egg(target), None, "editable", target, line)
    try:
        req = Requirement(line)
    except InvalidRequirement as e:
        raise UsageError(
            f"{origin}: {line!r} is not a requirement ({e})",
            hint="give the output of pip freeze",
        ) from None
    name = canonicalize_name(req.name)
    if req.url:
        kind = "vcs" if req.url.startswith(_VCS) else "url"
        return Installed(name, _version_of_file(req.url), kind, req.url, line)
    specs = list(req.specifier)
    if len(specs) != 1 or specs[0].operator not in ("==", "==="):
        raise UsageError(
            f"{origin}: {line!r} is not pinned to one version",
            hint="capture reads a pip freeze (name==version lines); to lock ranges use "
            "envlock lock SPEC -r FILE",
        )
    return Installed(name, specs[0].version, None, None, line)
