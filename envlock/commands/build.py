"""envlock build: build a bundle's image through the Docker Engine API."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "build",
        help="build a bundle's image through the Docker Engine API",
        description="Build DIR/Dockerfile with DIR alone as the context (its .dockerignore "
        "applies), against DOCKER_HOST or the default socket. Prints the image id and how "
        "many steps came from the cache. Exit 2 for a bad DIR, 3 when Docker or a step fails.",
    )
    p.add_argument("dir", metavar="DIR", help="bundle folder with a Dockerfile")
    p.add_argument("-t", "--tag", help="name the image, e.g. envlock/tf:2.15.1")
    p.add_argument(
        "--base-image", metavar="REF", help="build on this image (the BASE_IMAGE build argument)"
    )
    p.add_argument("--no-cache", action="store_true", help="run every step again")
    p.add_argument(
        "--network", metavar="MODE", help="network for RUN steps: host, none, or a network name"
    )
    p.add_argument(
        "--progress",
        choices=("auto", "plain", "quiet"),
        default="auto",
        help="plain: stream the build log to stderr; auto: only on a terminal (default)",
    )
    p.add_argument("--json", action="store_true", help="print the build result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from envlock.build import build_image
    from envlock.lock.manifest import recover_bundle

    # an interrupted `envlock lock`/`render` into DIR is finished or undone first
    note = recover_bundle(Path(args.dir))
    if note:
        sys.stderr.write(f"envlock: note: {note}\n")
    result = build_image(
        Path(args.dir),
        tag=args.tag,
        base_image=args.base_image,
        no_cache=args.no_cache,
        network=args.network,
        progress=args.progress,
    )
    if args.json:
        from envlock.output import emit_json

        emit_json(result.to_dict())
        return 0
    from envlock.output import table

    cacheable = result.cacheable_steps
    lines = [
        f"built {result.image_id}" + (f" ({', '.join(result.tags)})" if result.tags else ""),
        f"{result.total_steps} steps, {result.cached_steps} of {cacheable} cacheable from the "
        f"cache, {result.seconds:.1f} s"
        + (f", {result.size_bytes / 1e6:.0f} MB" if result.size_bytes else ""),
    ]
    lines += [f"repo digest: {d}" for d in result.repo_digests]
    interesting = {k: v for k, v in sorted(result.labels.items()) if k.startswith("io.envlock.")}
    if interesting:
        lines.append("")
        lines.append(table(["label", "value"], [[k, v] for k, v in interesting.items()]).rstrip())
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
