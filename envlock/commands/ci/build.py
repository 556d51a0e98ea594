"""envlock ci build: build, smoke-test, push and sign every cell of a `ci lock` folder."""

from __future__ import annotations

import argparse
from typing import Any

from envlock.output import finish


def register(ci_sub: Any) -> None:
    p = ci_sub.add_parser(
        "build",
        help="build, smoke-test, push and sign every cell of a `ci lock` folder",
        description="Every direct subfolder of DIR with a Dockerfile is a cell (its name is "
        "the cell id). Each cell is built (tag REPO:<cell-id> with --push, else "
        "envlock-ci:<cell-id>), smoke-tested in the image just built, and only when the "
        "smoke test passed pushed; with --sign its result is signed into "
        "DIR/<cell-id>/report.intoto.json, naming REPO@<manifest digest> and the image id "
        "that ran. With --push and --sign a pushed cell's SBOM (the lock's closure and the "
        "image's dpkg packages) is written to DIR/<cell-id>/sbom.cdx.json, signed, attached "
        "beside the report and named by it. A cell unchanged since the last run (same "
        "bundle files, base image and "
        "build arguments; its image still in the registry) is reused: same digest, not "
        "re-signed or re-attached. Build-stage images are removed at the end unless --keep. "
        "Cells run --jobs at a time; one failing cell does not stop the others. Progress on "
        "stderr (a live table on a terminal, plain lines prefixed [cell-id] otherwise, with a "
        "line at least every 30 s per running cell); the summary on stdout and in "
        "DIR/summary.json. Exit 1 if a cell failed, 2 for bad input, 3 when Docker cannot be "
        "reached.",
    )
    p.add_argument("dir", metavar="DIR", help="folder with one bundle per cell (`ci lock -o`)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="cells at a time (default 1)")
    p.add_argument(
        "--push",
        metavar="REPO",
        help="push each cell as REPO:<cell-id>; REPO names its registry host, "
        "e.g. ghcr.io/OWNER/tf",
    )
    p.add_argument("--sign", metavar="KEY", help="sign each smoke result with this private key")
    p.add_argument("--base-image", metavar="REF", help="build every cell on this image")
    p.add_argument(
        "--build-arg",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="a build argument the cells' Dockerfiles declare (repeatable)",
    )
    p.add_argument(
        "--allow-cpu", action="store_true", help="a smoke run without a GPU passes as WARNED"
    )
    p.add_argument(
        "--network", metavar="MODE", help="network for RUN steps: host, none, or a network name"
    )
    p.add_argument(
        "--keep",
        action="store_true",
        help="keep the build-stage images a multi-stage build leaves (removed by default)",
    )
    p.add_argument(
        "--summary-format",
        choices=("text", "markdown"),
        default="text",
        help="the summary on stdout: a text table (default) or a Markdown table, e.g. "
        '>> "$GITHUB_STEP_SUMMARY"',
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from envlock.ci.build_run import CiBuildRequest, build_all

    request = CiBuildRequest(
        dir=args.dir,
        jobs=args.jobs,
        push=args.push,
        sign=args.sign,
        base_image=args.base_image,
        build_arg=tuple(args.build_arg),
        allow_cpu=args.allow_cpu,
        network=args.network,
        keep=args.keep,
        markdown=args.summary_format == "markdown",
    )
    return finish(build_all(request), args.json)
