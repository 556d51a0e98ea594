"""A smoke result as the stages after the runner read it (``ci build``, the report).

The harness prints one JSON object (schema ``envlock.smoke/v1``); the runners
return it as a dict and that dict is what is written (``smoke.json``) and
signed, unchanged. ``SmokeResult.from_dict`` reads it once into the fields the
next stages decide on (status, checks, the image it ran in, each framework's
verdict); ``to_dict`` gives the document back as it came, so the JSON shape
never changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from envlock.smoke.harness import SmokeDocument

if TYPE_CHECKING:
    from envlock.resolve.paths import GpuPathsDict

PASSING = ("PASSED", "WARNED")


class ImageSeen(TypedDict, total=False):
    """``image`` of a run in a container (envlock.smoke.container)."""

    ref: str
    id: str
    labels: dict[str, str]
    pinned: str  # REPO@sha256:<manifest digest>, when run by digest


class RunnerInfo(TypedDict):
    kind: str  # "docker"
    gpus: str  # --gpus: all, none or a count
    network: str  # "none"


class SmokeRun(SmokeDocument, total=False):
    """What a runner returns: the harness's document, and where a container ran it."""

    image: ImageSeen
    runner: RunnerInfo
    paths: list[GpuPathsDict]  # envlock smoke's verdict per execution path and GPU


@dataclass(frozen=True)
class SmokeCheck:
    name: str
    status: str  # PASS | WARN | FAIL (as the harness wrote it)
    reason: str = ""


@dataclass(frozen=True)
class SmokeFramework:
    """One entry of ``frameworks``: a framework the run tested and its own verdict."""

    name: str
    status: str | None  # PASSED | WARNED | FAILED
    version: str | None = None
    checks: tuple[SmokeCheck, ...] = ()

    @property
    def passed(self) -> bool:
        return self.status in PASSING


# the harness tests at most its three frameworks; a longer list is read no further
MAX_FRAMEWORKS = 8


@dataclass(frozen=True)
class SmokeImage:
    """``result["image"]`` of a run in a container: the reference, the image id and,
    when run by digest, REPO@sha256:<manifest digest>."""

    ref: str | None = None
    id: str | None = None
    pinned: str | None = None


@dataclass(frozen=True)
class SmokeResult:
    status: str | None  # PASSED | WARNED | FAILED; anything else is not a passing run
    checks: tuple[SmokeCheck, ...] = ()
    image: SmokeImage | None = None
    frameworks: tuple[SmokeFramework, ...] = ()  # empty in a result written before issue 40
    document: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> SmokeResult:
        """Read a runner's result; never raises (a field of the wrong type reads as absent:
        ``envlock.report.result_check.check_result`` is the validation before signing)."""
        checks = _checks(doc.get("checks"))
        frameworks = []
        runs = doc.get("frameworks")
        for run in runs[:MAX_FRAMEWORKS] if isinstance(runs, list) else []:
            if isinstance(run, Mapping) and isinstance(run.get("framework"), str):
                frameworks.append(
                    SmokeFramework(
                        name=run["framework"],
                        status=_text(run.get("status")),
                        version=_text(run.get("version")),
                        checks=_checks(run.get("checks")),
                    )
                )
        image = doc.get("image")
        seen = None
        if isinstance(image, Mapping):
            seen = SmokeImage(
                ref=_text(image.get("ref")),
                id=_text(image.get("id")),
                pinned=_text(image.get("pinned")),
            )
        status = doc.get("status")
        return cls(
            status=None if status is None else str(status),
            checks=checks,
            image=seen,
            frameworks=tuple(frameworks),
            document=doc,
        )

    def to_dict(self) -> dict[str, Any]:
        """The result as the runner returned it (the document written and signed)."""
        return dict(self.document)

    @property
    def passed(self) -> bool:
        """PASSED or WARNED: the exit status 0 of ``envlock smoke``."""
        return self.status in PASSING

    @property
    def failed_checks(self) -> tuple[SmokeCheck, ...]:
        return tuple(c for c in self.checks if c.status == "FAIL")


def _checks(items: Any) -> tuple[SmokeCheck, ...]:
    checks = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, Mapping):
            checks.append(
                SmokeCheck(
                    name=str(item.get("name")),
                    status=str(item.get("status")),
                    reason=str(item.get("reason", "")),
                )
            )
    return tuple(checks)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
