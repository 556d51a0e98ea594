"""The project's own GitHub Actions workflows: actionlint, the README's test command,
and the scheduled matrix refresh calling sub-commands and flags that exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from test_ci_init import actionlint

from envlock.parser import build_parser

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


@pytest.mark.parametrize("path", WORKFLOWS, ids=[p.name for p in WORKFLOWS])
def test_actionlint_passes(path: Path) -> None:
    lint = actionlint(path)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_ci_runs_the_readmes_test_command() -> None:
    ci = (ROOT / ".github" / "workflows" / "ci.yml").read_text()
    assert "bash .ci/run" in ci
    assert "./tests/run.sh" in (ROOT / ".ci" / "run").read_text()
    assert "`./tests/run.sh` is also what CI runs (`.ci/run`)" in (ROOT / "README.md").read_text()


def test_scheduled_refresh_runs_matrix_refresh_and_check_with_real_flags() -> None:
    text = (ROOT / ".github" / "workflows" / "matrix-refresh.yml").read_text()
    assert re.search(r"^  schedule:\n    - cron: ", text, re.M)
    commands = re.findall(r"\.venv/bin/envlock (matrix [^>|\n]+?)\s*(?:[0-9]?>|\||$)", text, re.M)
    assert [c.split()[:3] for c in commands] == [
        ["matrix", "refresh", "--check"],  # the canary: exit 1 when behind the index
        ["matrix", "refresh", "-o"],
        ["matrix", "check", "--matrix"],
    ]
    parser = build_parser()
    for command in commands:
        args = parser.parse_args(shlex.split(command))  # argparse exits on an unknown flag
        assert args.matrix_command in ("refresh", "check")
    # the pull request with the refreshed matrix, opened by the job's own token
    assert "gh pr create" in text and "pull-requests: write" in text


def test_the_workflows_actions_are_pinned_by_commit_sha() -> None:
    text = (ROOT / ".github" / "workflows" / "matrix-refresh.yml").read_text()
    uses = re.findall(r"uses: (\S+)", text)
    assert len(uses) == 3
    for ref in uses:
        assert re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+@[0-9a-f]{40}", ref), ref
