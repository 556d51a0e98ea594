"""``envlock ci init``: flags, the call into ``envlock.ci.workflow``, printing.

Writes the GitHub Actions workflow over the committed cells, and beside it
envlock's hash-pinned install requirements (``envlock.ci.install``).
"""

from __future__ import annotations

import argparse
from typing import Any

from envlock.commands.options import CELL_SPEC_HELP
from envlock.output import finish


def register(ci_sub: Any) -> None:
    init = ci_sub.add_parser(
        "init",
        help="write a GitHub Actions workflow that gates, builds, smoke-tests, pushes and "
        "signs the committed cells",
        description="Write a GitHub Actions workflow over the cells committed in --cells "
        "(`envlock ci lock SPEC -o cells`): on a pull request `ci lock --check` and a build "
        "without push; on the default branch each cell built and smoke-tested on a GPU "
        "runner, pushed to ghcr.io/<repository>, signed with the ENVLOCK_SIGNING_KEY secret "
        "and attached; then one report page over all cells and `verify --require-pass` of "
        "each pushed digest. Beside it, in --install-dir: requirements.txt (envlock's wheel "
        "and closure, every file by sha256; the workflow installs with --require-hashes), "
        "the wheel when --envlock-wheel is a file, the public key with --public-key. Every "
        "`uses:` is pinned to a commit from envlock's actions table (or --actions-from). "
        "Existing files are kept unless --force.",
    )
    init.add_argument("--spec", required=True, metavar="SPEC", help=CELL_SPEC_HELP)
    init.add_argument(
        "-o",
        "--output",
        default=".github/workflows/envlock-images.yml",
        metavar="FILE",
        help="workflow file to write (default .github/workflows/envlock-images.yml)",
    )
    init.add_argument(
        "--runner-label",
        default="gpu",
        metavar="LABEL",
        help="default runner label of the GPU machines (a workflow input; default gpu)",
    )
    init.add_argument(
        "--cells",
        default="cells",
        metavar="DIR",
        help="the committed `ci lock` folder, relative to the repository root (default cells)",
    )
    init.add_argument(
        "--install-dir",
        default=".github/envlock",
        metavar="DIR",
        help="where requirements.txt, the wheel and the public key go, relative to the "
        "repository root (default .github/envlock)",
    )
    init.add_argument(
        "--envlock-wheel",
        required=True,
        metavar="WHEEL|URL#sha256=HEX",
        help="envlock's wheel: a file (copied into --install-dir and committed; make it with "
        "`uv build --wheel` in envlock's checkout) or an https URL with its sha256",
    )
    init.add_argument(
        "--public-key",
        metavar="PUB",
        help="the public key (`envlock keygen`'s NAME.pub.pem) the report job verifies "
        "with, copied into --install-dir",
    )
    init.add_argument(
        "--actions-from",
        metavar="FILE",
        help="table of pinned actions (action, tag, sha, read), laid out as envlock's "
        "matrices/actions.toml; default: that table",
    )
    init.add_argument(
        "--build-arg",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="a build argument the workflow's `ci build` passes (repeatable), e.g. "
        "PIP_INDEX_URL=https://mirror.example/simple for a runner that installs from a mirror",
    )
    init.add_argument(
        "--build-network",
        metavar="MODE",
        help="network for the RUN steps of the workflow's builds (host, none, a network "
        "name): for self-hosted runners whose Docker daemon has no default bridge",
    )
    init.add_argument("--index-url", metavar="URL", help="simple-API index (default: pip/uv's)")
    init.add_argument(
        "--exclude-newer",
        metavar="DATE",
        help="lock envlock's dependencies from files uploaded before DATE (YYYY-MM-DD: the "
        "start of that day in UTC, or an RFC 3339 timestamp)",
    )
    init.add_argument("--force", action="store_true", help="replace existing files")
    init.set_defaults(func=run_init)


def run_init(args: argparse.Namespace) -> int:
    from envlock.ci.init_run import InitRequest, init_workflow

    request = InitRequest(
        spec=args.spec,
        envlock_wheel=args.envlock_wheel,
        output=args.output,
        runner_label=args.runner_label,
        cells=args.cells,
        install_dir=args.install_dir,
        public_key=args.public_key,
        actions_from=args.actions_from,
        build_arg=tuple(args.build_arg),
        build_network=args.build_network,
        index_url=args.index_url,
        exclude_newer=args.exclude_newer,
        force=args.force,
    )
    return finish(init_workflow(request), False)  # no --json: the text names each file
