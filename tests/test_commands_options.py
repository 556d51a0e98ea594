"""Shared flags are declared once, in envlock/commands/options.py (issue #23): no
command module takes a flag declaration or a flags-to-object function from another."""

from __future__ import annotations

import ast
from pathlib import Path

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
