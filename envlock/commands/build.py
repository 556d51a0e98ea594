"""envlock build: build a bundle's image through the Docker Engine API, optionally push it."""

from __future__ import annotations

import argparse
from typing import Any

from envlock.output import finish


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


def run(args: argparse.Namespace) -> int:
    from envlock.image.build_run import BuildRequest, build

    request = BuildRequest(
        dir=args.dir,
        tag=args.tag,
        base_image=args.base_image,
        build_arg=tuple(args.build_arg),
        no_cache=args.no_cache,
        network=args.network,
        push=args.push,
        progress=args.progress,
    )
    return finish(build(request), args.json)
