"""The SPEC: a requirement on tensorflow, read by packaging.

``==X.Y`` means the X.Y series (``==X.Y.*``), as people mean it; every other
specifier keeps its PEP 440 meaning, epochs and local labels included: the
matrix holds epoch-0 releases without local labels, so ``==1!2.15`` or
``==2.15.1+cpu`` match nothing and say why. Anything that is not a plain
requirement on tensorflow (another project, a URL, a marker, an unknown extra,
a version packaging cannot hold) is a ``UsageError`` saying what to write
instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import Specifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envlock.errors import UsageError
from envlock.readers import quoted

FRAMEWORK = "tensorflow"
FRAMEWORKS = ("tensorflow", "torch", "jax")
# the extras understood, per project: tensorflow's and-cuda; JAX's CUDA plugins
# (cuda: either major, whichever fits the driver)
EXTRAS = {"tensorflow": ("and-cuda",), "torch": (), "jax": ("cuda", "cuda12", "cuda13")}

SPEC_HINT = (
    "write a requirement on tensorflow, torch or jax, e.g. 'tensorflow==2.15', "
    "'torch==2.11' or 'jax[cuda12]'"
)

# "tensorflow=2.15": one '=' where two were meant
MAX_SPEC_CHARS = 200  # "tensorflow[and-cuda]>=2.14,<2.17,!=2.15.0" is 42

_SINGLE_EQUALS = re.compile(r"^([A-Za-z0-9._-]+)\s*=\s*([0-9][^=<>!~,;]*)$")


@dataclass(frozen=True)
class Spec:
    """The SPEC, read."""

    text: str  # as given, stripped
    shown: str  # the specifier as applied, with ==X.Y widened to ==X.Y.*: "==2.15.*"
    widened: bool  # some ==X.Y was widened
    prereleases: bool  # the SPEC names a pre-release (the matrix holds none)
    exact: Version | None  # the version pinned exactly (==X.Y.Z, ===), if any
    and_cuda: bool  # the [and-cuda] extra was asked for
    specifier: SpecifierSet  # the widened specifier
    epoch: bool = False  # some clause names an epoch other than 0 ("1!2.15")
    local: bool = False  # some clause names a local label ("2.15.1+cpu")
    project: str = FRAMEWORK  # one of FRAMEWORKS
    extras: tuple[str, ...] = ()  # canonical, sorted

    @property
    def jax_builds(self) -> tuple[str, ...]:
        """The JAX CUDA builds the extras admit ("cuda12", "cuda13"); () for other projects."""
        if self.project != "jax":
            return ()
        if "cuda" in self.extras:
            return ("cuda12", "cuda13")
        return tuple(e for e in self.extras if e.startswith("cuda"))

    def admits(self, version: Version) -> bool:
        """Whether the (widened) specifier admits ``version``, pre-releases included."""
        return self.specifier.contains(version, prereleases=True)


def parse_spec(text: str) -> Spec:
    """Read the SPEC; UsageError when it is not a requirement envlock resolves."""
    stripped = text.strip()
    if not stripped:
        raise UsageError("SPEC is empty", hint=SPEC_HINT)
    if len(stripped) > MAX_SPEC_CHARS:
        raise UsageError(
            f"SPEC {quoted(text)} is longer than {MAX_SPEC_CHARS} characters", hint=SPEC_HINT
        )
    given, extras, project = _read_requirement(text, stripped)
    unknown = sorted(extras - set(EXTRAS[project]))
    if unknown and project == "tensorflow":
        raise UsageError(
            f"SPEC {quoted(text)} asks for the extra {unknown[0]!r}; only [and-cuda] is understood",
            hint="use 'tensorflow[and-cuda]==X.Y' or --cuda-source pip for the CUDA wheels",
        )
    if unknown and project == "torch":
        raise UsageError(
            f"SPEC {quoted(text)} asks for the extra {unknown[0]!r}; a torch build brings its "
            "CUDA wheels without one",
            hint="write e.g. 'torch==2.11'",
        )
    if unknown:
        raise UsageError(
            f"SPEC {quoted(text)} asks for the extra {unknown[0]!r}; envlock resolves JAX's "
            "pip CUDA builds: [cuda12], [cuda13] or [cuda] (either)",
            hint="write e.g. 'jax[cuda12]==0.11.2'",
        )
    if project == "jax" and not extras:
        raise UsageError(
            f"SPEC {quoted(text)} is JAX without a CUDA extra: the CPU build",
            hint=f"write '{_with_extra(stripped, 'cuda12')}' or "
            f"'{_with_extra(stripped, 'cuda13')}' for a CUDA build",
        )
    widened: list[str] = []
    exact: Version | None = None
    prereleases = epoch = local = False
    for clause in given:
        version_text = clause.version
        if clause.operator == "===":
            exact = _version_or_none(version_text)
            widened.append(str(clause))
            continue
        version = _clause_version(text, clause)
        epoch = epoch or version.epoch != 0
        local = local or version.local is not None
        if version_text.endswith(".*"):
            widened.append(str(clause))
            continue
        if version.is_prerelease and clause.operator != "!=":
            prereleases = True  # as packaging and pip read it: "!=X.YrcN" admits none
        if (
            clause.operator == "=="
            and len(version.release) == 2
            and version.pre is None
            and version.post is None
            and version.dev is None
            and version.local is None
        ):
            series = f"{version.epoch}!" if version.epoch else ""
            widened.append(f"=={series}{version.major}.{version.minor}.*")
            continue
        if clause.operator == "==" and len(given) == 1:
            exact = version
        widened.append(str(Specifier(f"{clause.operator}{version_text}")))
    specifier = SpecifierSet(",".join(widened))
    return Spec(
        text=stripped,
        shown=str(specifier),
        widened=specifier != given,
        prereleases=prereleases,
        exact=exact,
        and_cuda="and-cuda" in extras,
        specifier=specifier,
        epoch=epoch,
        local=local,
        project=project,
        extras=tuple(sorted(extras)),
    )


def _with_extra(text: str, extra: str) -> str:
    """``jax==0.11.2`` -> ``jax[cuda12]==0.11.2``."""
    name = re.match(r"[A-Za-z0-9._-]+", text)
    end = name.end() if name else len(text)
    return f"{text[:end]}[{extra}]{text[end:].strip()}"


def _clause_version(text: str, clause: Specifier) -> Version:
    """The version a clause names (without a trailing ``.*``); UsageError when
    packaging cannot hold it (a release number of thousands of digits)."""
    version_text = clause.version.removesuffix(".*")
    try:
        return Version(version_text)
    except (InvalidVersion, ValueError):
        raise UsageError(
            f"SPEC {quoted(text)}: {quoted(version_text)} is not a version packaging can compare",
            hint=SPEC_HINT,
        ) from None


def _read_requirement(text: str, stripped: str) -> tuple[SpecifierSet, set[str], str]:
    """(specifier as written, canonical extras, project) of the SPEC; UsageError when it
    is not a requirement on tensorflow, torch or jax without URL or marker."""
    hint = SPEC_HINT
    try:
        requirement = Requirement(stripped)
    except (InvalidRequirement, ValueError) as e:
        first = str(e).splitlines()[0] if str(e) else "cannot parse it"
        single = _SINGLE_EQUALS.fullmatch(stripped)
        if single:
            hint = f"did you mean '{single.group(1)}=={single.group(2).strip()}'?"
        raise UsageError(
            f"SPEC {quoted(text)} is not a valid requirement: {first}", hint=hint
        ) from None
    name = canonicalize_name(requirement.name)
    if name not in FRAMEWORKS:
        other = hint
        if name.startswith(("tensorflow-", "tf-")):
            other = (
                "the GPU build is the 'tensorflow' package itself since 2.1; "
                "write e.g. 'tensorflow==2.15'"
            )
        raise UsageError(
            f"SPEC {quoted(text)} is a requirement on {requirement.name!r}; "
            "envlock resolves tensorflow, torch and jax",
            hint=other,
        )
    if requirement.url:
        raise UsageError(
            f"SPEC {quoted(text)} names a URL; envlock resolves releases on the index", hint=hint
        )
    if requirement.marker is not None:
        raise UsageError(
            f"SPEC {quoted(text)} has an environment marker; the target is fixed (Linux x86_64)",
            hint="drop the '; ...' part and use --python for the interpreter",
        )
    extras = {str(canonicalize_name(extra)) for extra in requirement.extras}
    return requirement.specifier, extras, str(name)


def _version_or_none(text: str) -> Version | None:
    try:
        return Version(text)
    except (InvalidVersion, ValueError):  # ValueError: an integer of thousands of digits
        return None
