"""Shared flags are declared once, in envlock/commands/options.py (issue #23): no
command module takes a flag declaration or a flags-to-object function from another."""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import envlock.commands
from envlock.commands import options

COMMANDS = Path(envlock.commands.__file__).parent


def _flag_helpers(names: list[str]) -> list[str]:
    return [n for n in names if n.startswith("add_") or n.endswith(("_options", "_from_args"))]


def test_no_command_module_imports_flags_from_another() -> None:
    found = []
    for path in sorted(COMMANDS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            if not node.module.startswith("envlock.commands.") or node.module.endswith(".options"):
                continue
            helpers = _flag_helpers([a.name for a in node.names])
            if helpers:
                found.append(f"{path.relative_to(COMMANDS)}: {node.module} {helpers}")
    assert found == []


def test_the_shared_flags_are_declared_in_options() -> None:
    declared = {n for n in dir(options) if callable(getattr(options, n))}
    assert {
        "add_resolve_arguments",
        "constraints_from_args",
        "add_pin_arguments",
        "add_render_arguments",
        "add_force_argument",
        "render_options",
    } <= declared
    assert "options" in envlock.commands.NOT_COMMANDS  # not discovered as a sub-command


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def test_no_parser_takes_an_abbreviated_option() -> None:
    """Issue 38, break 11: `%envlock restore ~/env --in-pl` was `--in-place` to the
    parser, but the magic reads options by their whole names, so it added --venv
    for another environment. Every parser (the harness's too) refuses abbreviations."""
    from envlock.parser import build_parser
    from envlock.smoke.harness import build_parser as harness_parser

    every = list(_parsers(build_parser()))
    assert len({p.prog for p in every}) == len(every)  # each sub-command seen once
    assert [p.prog for p in every if p.allow_abbrev] == []
    assert harness_parser().allow_abbrev is False


def test_an_abbreviation_is_an_error_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    from envlock.cli import main

    with pytest.raises(SystemExit) as e:
        main(["restore", "env", "--in-pl"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        "envlock: error: unrecognized arguments: --in-pl\n  hint: see 'envlock restore --help'\n"
    )
