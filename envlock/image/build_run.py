"""``envlock build DIR`` as one call: ``build(BuildRequest)``: a bundle's image built
through the Docker Engine API, optionally pushed."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envlock.image.push import Pushed


def _stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


@dataclass(frozen=True)
class BuildRequest:
    """``envlock build``'s flags as typed values."""

    dir: str
    tag: str | None = None
    base_image: str | None = None
    build_arg: tuple[str, ...] = ()
    no_cache: bool = False
    network: str | None = None
    push: bool = False
    progress: str = "auto"


@dataclass(frozen=True)
class Built:
    """The build (and push): ``to_dict`` is the build result's document, with
    ``pushed`` after a push (``envlock build --json``)."""

    result: Any  # envlock.image.build's result
    pushed: Pushed | None = None

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = self.result.to_dict()
        if self.pushed is not None:
            doc["pushed"] = self.pushed.to_dict()
        return doc

    def text(self) -> str:
        from envlock.output import table

        result, pushed = self.result, self.pushed
        cacheable = result.cacheable_steps
        lines = [
            f"built {result.image_id}" + (f" ({', '.join(result.tags)})" if result.tags else ""),
            f"{result.total_steps} steps, {result.cached_steps} of {cacheable} cacheable from the "
            f"cache, {result.seconds:.1f} s"
            + (f", {result.size_bytes / 1e6:.0f} MB" if result.size_bytes else ""),
        ]
        lines += [f"repo digest: {d}" for d in result.repo_digests]
        if pushed is not None:
            lines.append(f"pushed {pushed.pinned}")
        labels = sorted(result.labels.items())
        interesting = {k: v for k, v in labels if k.startswith("io.envlock.")}
        if interesting:
            lines.append("")
            rows = [[k, v] for k, v in interesting.items()]
            lines.append(table(["label", "value"], rows).rstrip())
        return "\n".join(lines) + "\n"


def build(args: BuildRequest) -> Built:
    """Build DIR's image (and push it with ``push``)."""
    from envlock.bundle.manifest import recover_bundle
    from envlock.errors import UsageError
    from envlock.image.build import build_image
    from envlock.image.dockerfile import parse_build_args
    from envlock.image.push import check_push_reference, push

    build_args = parse_build_args(args.build_arg)
    tag: Any
    if args.push:
        if not args.tag:
            raise UsageError(
                "--push needs --tag naming the registry to push to",
                hint="--tag HOST[:PORT]/NAME:TAG, e.g. --tag 127.0.0.1:5000/envlock/tf:2.15.1",
            )
        tag = check_push_reference(args.tag)  # parsed once: build and push are handed it
    else:
        tag = args.tag
    # an interrupted `envlock lock`/`render` into DIR is finished or undone first
    note = recover_bundle(Path(args.dir))
    if note:
        sys.stderr.write(f"envlock: note: {note}\n")
    result = build_image(
        Path(args.dir),
        tag=tag,
        base_image=args.base_image,
        build_args=build_args,
        no_cache=args.no_cache,
        network=args.network,
        progress=args.progress,
    )
    pushed: Pushed | None = None
    if args.push:
        out = None if args.progress == "quiet" else _stderr
        pushed = push(tag, out=out)
    return Built(result, pushed)
