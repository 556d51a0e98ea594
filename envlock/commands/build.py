"""envlock build: build a bundle's image through the Docker Engine API, optionally push it."""

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
        "many steps came from the cache; with --push, the manifest digest the registry "
        "answered. OCI labels (created from SOURCE_DATE_EPOCH when set, source and revision "
        "from git or GitHub Actions, base.name/base.digest) are set at build time. "
        "Exit 2 for bad input, 3 when Docker, a step or the registry fails.",
    )
    p.add_argument("dir", metavar="DIR", help="bundle folder with a Dockerfile")
    p.add_argument("-t", "--tag", help="name the image, e.g. envlock/tf:2.15.1")
    p.add_argument(
        "--base-image", metavar="REF", help="build on this image (the BASE_IMAGE build argument)"
    )
    p.add_argument(
        "--build-arg",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="a build argument the Dockerfile declares (repeatable): BASE_IMAGE, UV_IMAGE, "
        "PIP_INDEX_URL, UV_PYTHON_INSTALL_MIRROR; no credentials in URLs (they stay in the "
        "image history)",
    )
    p.add_argument("--no-cache", action="store_true", help="run every step again")
    p.add_argument(
        "--network", metavar="MODE", help="network for RUN steps: host, none, or a network name"
    )
    p.add_argument(
        "--push",
        action="store_true",
        help="push --tag (HOST[:PORT]/NAME:TAG) to its registry and print the manifest digest",
    )
    p.add_argument(
        "--progress",
        choices=("auto", "plain", "steps", "quiet"),
        default="auto",
        help="to stderr: plain streams the build log, steps one line per step; auto: the log "
        "on a terminal, step lines otherwise (default); quiet: nothing",
    )
    p.add_argument("--json", action="store_true", help="print the build result as JSON")
    p.set_defaults(func=run)


def _stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    from envlock.bundle.manifest import recover_bundle
    from envlock.errors import UsageError
    from envlock.image.build import build_image
    from envlock.image.dockerfile import parse_build_args
    from envlock.image.push import Pushed, check_push_reference, push

    build_args = parse_build_args(args.build_arg)
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
    if args.json:
        from envlock.output import emit_json

        doc = result.to_dict()
        if pushed is not None:
            doc["pushed"] = pushed.to_dict()
        emit_json(doc)
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
    if pushed is not None:
        lines.append(f"pushed {pushed.pinned}")
    interesting = {k: v for k, v in sorted(result.labels.items()) if k.startswith("io.envlock.")}
    if interesting:
        lines.append("")
        lines.append(table(["label", "value"], [[k, v] for k, v in interesting.items()]).rstrip())
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
