"""Thin commands (issue 44): every command module registers its options, calls one
library function with a typed request and prints the typed result.

Two rules, read from the source (``ast``; nothing is imported):

1. Size: the lines of every ``.py`` file under envlock/commands/ (recursively)
   total under 2,500.

2. Imports: a command module is every ``.py`` file under envlock/commands/ except
   ``options.py`` (the shared flags, which turn parsed flags into library objects).
   Every import it makes of an envlock module counts, wherever it stands (top level
   or inside a function), in every form (``import envlock.x``, ``from envlock.x
   import y``, ``from envlock import x``), except imports under
   ``if TYPE_CHECKING:`` (types only, never run). ``from envlock.x import y``
   where ``envlock/x/y.py`` (or ``envlock/x/y/``) exists counts as importing
   ``envlock.x.y``; otherwise as importing ``envlock.x``. Of the envlock modules a
   command module imports, these are free: ``envlock.output`` (the printing
   helpers), ``envlock.errors``, and ``envlock.commands`` with everything under it
   (``options``, the shared option helpers, and a group's sub-command modules).
   All the others together must be at most ONE module: the library module whose
   function the command calls, with its request and result types.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ROOT / "envlock" / "commands"
MAX_LINES = 2_500
FREE = ("envlock.output", "envlock.errors")
NOT_COMMAND_MODULES = {"options.py"}  # the shared flags: they build the library's requests


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                for child in node.body:
                    inside.update(id(n) for n in ast.walk(child))
    return inside


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def envlock_imports(source: str) -> set[str]:
    """The envlock modules ``source`` imports (rule 2's reading)."""
    tree = ast.parse(source)
    skipped = _type_checking_nodes(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "envlock")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "envlock":
                continue
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if _is_module(child) else node.module)
    return found


def library_imports(source: str) -> set[str]:
    """The imports rule 2 counts: all but the free ones."""
    return {
        m
        for m in envlock_imports(source)
        if m not in FREE and m != "envlock.commands" and not m.startswith("envlock.commands.")
    }


def _command_modules() -> list[Path]:
    return sorted(p for p in COMMANDS.rglob("*.py") if p.name not in NOT_COMMAND_MODULES)


def test_commands_total_under_2500_lines() -> None:
    files = sorted(COMMANDS.rglob("*.py"))
    assert len(files) > 10
    total = sum(_lines(p) for p in files)
    assert total < MAX_LINES, f"envlock/commands/: {total} lines"


def test_each_command_module_imports_one_library_module_at_most() -> None:
    over = {}
    for path in _command_modules():
        found = library_imports(path.read_text(encoding="utf-8"))
        if len(found) > 1:
            over[str(path.relative_to(COMMANDS))] = sorted(found)
    assert over == {}


def test_the_rule_counts_what_a_command_of_yesterday_imported() -> None:
    """The reading fails the pre-#44 ``commands/wheelhouse.py`` (two library modules,
    one inside a function) and frees output, errors, commands.* and TYPE_CHECKING."""
    old = (
        "from typing import TYPE_CHECKING\n"
        "from envlock import output\n"
        "from envlock.errors import UsageError\n"
        "from envlock.commands.options import render_options\n"
        "if TYPE_CHECKING:\n"
        "    from envlock.bundle.check import CheckResult\n"
        "def run(args):\n"
        "    from envlock.venv.wheelhouse import build_wheelhouse\n"
        "    from envlock.venv.install import RestoreRequest, default_venv\n"
    )
    assert library_imports(old) == {"envlock.venv.wheelhouse", "envlock.venv.install"}
    assert library_imports("import envlock.resolve\nfrom envlock import model\n") == {
        "envlock.resolve",
        "envlock.model",
    }
    assert library_imports("from envlock.venv import smoke\n") == {"envlock.venv.smoke"}
