"""docs/reference/ is generated from envlock's parser by scripts/cli-reference.py:
regenerated here and compared page by page, whole, so an option added without
its reference line fails with the command that fixes it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "cli-reference.py"
DOCS = REPO / "docs" / "reference"
FIX = ".venv/bin/python scripts/cli-reference.py"


def _generate(out: Path) -> dict[str, str]:
    subprocess.run([sys.executable, str(SCRIPT), "-o", str(out)], check=True, capture_output=True)
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(out.glob("*.md"))}


def test_the_reference_pages_are_what_the_parser_says(tmp_path: Path) -> None:
    fresh = _generate(tmp_path / "ref")
    shipped = {p.name: p.read_text(encoding="utf-8") for p in sorted(DOCS.glob("*.md"))}
    assert sorted(shipped) == sorted(fresh), f"docs/reference/ pages differ; run: {FIX}"
    for name, text in fresh.items():
        assert shipped[name] == text, f"docs/reference/{name} is out of date; run: {FIX}"


def test_every_option_of_every_command_has_its_line(tmp_path: Path) -> None:
    """Independent of the page layout: each option string of each parser
    appears on its command's page."""
    import argparse

    from envlock.parser import build_parser

    fresh = _generate(tmp_path / "ref")

    def walk(parser: argparse.ArgumentParser, page: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    walk(child, page)
            if action.help == argparse.SUPPRESS:
                continue
            for flag in action.option_strings:
                assert f"`{flag}" in fresh[page], f"{parser.prog} {flag} not in {page}"

    top = build_parser()
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                walk(child, f"{name}.md")


def test_an_added_option_without_its_line_fails_naming_the_fix(tmp_path: Path) -> None:
    """The check really catches drift: a page missing one option line differs
    from what the generator writes."""
    fresh = _generate(tmp_path / "ref")
    page = fresh["lock.md"]
    line = next(x for x in page.splitlines() if x.startswith("- `--offline`"))
    assert page.replace(line + "\n", "") != page
