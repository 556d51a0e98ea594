"""Every read of a file's bytes goes through the bounded readers (issue #38).

``envlock.readers`` (``read_bytes``, ``read_text``, ``read_json``, ``read_toml``,
``read_member``), ``fsutil.read_input`` and ``index.body.read_body`` bound what
they read and refuse what is not a regular file. A plain ``open()``,
``Path.read_bytes()``, ``Path.read_text()`` or ``json.load()`` does neither: a
FIFO hangs, ``/dev/zero`` fills memory. This test parses every module under
envlock/ (``ast``; nothing is imported) and counts those calls per module.

``KNOWN`` holds the calls that are there today, each module with the reason its
reads are not the user's input. A new call anywhere fails this test: move it
onto a bounded reader, or add it here with its reason in review. A count that
went down fails too, so the list only ever shrinks. The harness and the probe
run standalone inside other interpreters and carry their own bounded reads.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "envlock"
STANDALONE = {"smoke/harness.py", "venv/probe.py"}  # run inside other interpreters
RAW = {"open", "read_bytes", "read_text", "load"}  # load: json.load / tomllib.load

# module -> (calls, why they are not unbounded reads of user input)
KNOWN: dict[str, tuple[int, str]] = {
    "bundle/origin.py": (1, "/etc/machine-id, a system file"),
    "venv/notebook_install.py": (
        1,
        "envlock's own package files (the shim notebook install copies)",
    ),
    "doctor/knownerrors.py": (1, "envlock's own known_errors.toml (package data)"),
    "doctor/runner.py": (1, "--log, opened to be read line by line (a log is long by nature)"),
    "fsutil.py": (1, "sha256_file: streamed in chunks, nothing kept"),
    "lock/buildreqs.py": (
        2,
        "a source archive's pyproject.toml member and envlock's cache entry of it, each "
        "read up to its bound plus one byte (over it: not used)",
    ),
    "lock/gpufacts.py": (1, "a range of a file:// wheel, no longer than the range asked for"),
    "lock/pip.py": (1, "the --report the run's own pip wrote in a temp folder"),
    "lock/uv.py": (2, "files the run's own uv wrote in a temp folder"),
    "matrix/cache.py": (1, "the matrix and parser files hashed for the cache's stamp"),
    "notebook.py": (1, "the extension's notebook.json (standard library only, runs in kernels)"),
    "render/__init__.py": (2, "envlock's own templates and runtime module"),
    "render/envlock_runtime.py": (2, "runs in the image: its own runtime settings file"),
    "resources.py": (2, "envlock's own package data"),
    "smoke/__init__.py": (1, "envlock's own harness source"),
    "smoke/container.py": (1, "envlock's own harness source, put into the container"),
    "venv/interpreter.py": (1, "envlock's own probe source"),
}


def _writes(call: ast.Call) -> bool:
    """``open(path, "w")`` and the like: a write, not a read."""
    mode = call.args[1] if len(call.args) > 1 else None
    for kw in call.keywords:
        if kw.arg == "mode":
            mode = kw.value
    return (
        isinstance(mode, ast.Constant)
        and isinstance(mode.value, str)
        and any(c in mode.value for c in "wax")
    )


def raw_reads(path: Path) -> list[int]:
    """The lines of ``path`` that read a file's bytes past the bounded readers."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            if not _writes(node):
                lines.append(node.lineno)
        elif isinstance(func, ast.Attribute) and func.attr in ("read_bytes", "read_text"):
            owner = func.value
            if isinstance(owner, ast.Name) and owner.id in ("readers", "resources"):
                continue  # envlock.readers' bounded reader; envlock's own package data
            lines.append(node.lineno)
        elif (
            isinstance(func, ast.Attribute)
            and func.attr == "load"
            and isinstance(func.value, ast.Name)
            and func.value.id in ("json", "tomllib")
        ):
            lines.append(node.lineno)
    return sorted(lines)


def test_no_module_reads_bytes_past_the_bounded_readers() -> None:
    found = Counter()
    for path in sorted(ROOT.rglob("*.py")):
        name = str(path.relative_to(ROOT))
        if name in STANDALONE:
            continue
        n = len(raw_reads(path))
        if n:
            found[name] = n
    known = {name: calls for name, (calls, _) in KNOWN.items() if calls}
    assert dict(found) == known, (
        "a module reads a file's bytes without envlock.readers / fsutil.read_input / "
        "body.read_body (or one of the reads listed in KNOWN went away: lower its count)"
    )


def test_every_known_read_says_why() -> None:
    assert [name for name, (calls, why) in KNOWN.items() if calls and not why] == []
