"""TensorFlow's ``python/platform/build_info.py``, read as data (``ast``, never run)."""

from __future__ import annotations

import ast
import threading
from typing import Any

from envlock.errors import DataError

# ast.parse is not safe to call from two threads at once on CPython 3.11: the AST
# constructor's recursion counter is shared, and `matrix refresh` (which reads
# wheels on a thread pool) failed with "SystemError: AST constructor recursion
# depth mismatch" in this suite (python/cpython#106905 is that bug's family).
_PARSE = threading.Lock()


def parse_build_info(text: str, filename: str = "build_info.py") -> dict[str, Any]:
    """The literal assignments of a build_info.py, parsed with ``ast`` (never run).

    Knows the three shapes TensorFlow wrote: ``build_info = {...}``,
    ``build_info = collections.OrderedDict([...])`` and plain module variables
    (``cuda_version_number = '10.1'``). ``*_version_number`` become ``*_version``.
    """
    try:
        with _PARSE:
            tree = ast.parse(text, filename=filename)
    except SyntaxError as e:
        raise DataError(f"{filename}: not valid Python: {e.msg} (line {e.lineno})") from None
    except ValueError as e:  # a NUL byte before 3.12 (a SyntaxError from 3.12 on)
        raise DataError(f"{filename}: not valid Python: {e}") from None
    out: dict[str, Any] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if not isinstance(target, ast.Name):
            continue
        value = node.value
        if target.id == "build_info":
            if isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
                value = value.args[0]  # OrderedDict([...]) -> the list of pairs
            try:
                literal = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            if isinstance(literal, (list, tuple)):
                try:
                    literal = dict(literal)
                except (TypeError, ValueError):
                    continue
            if isinstance(literal, dict):
                out.update({str(k): v for k, v in literal.items()})
            continue
        try:
            out[target.id] = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
    renames = (("cuda_version_number", "cuda_version"), ("cudnn_version_number", "cudnn_version"))
    for old, new in renames:
        if old in out and new not in out:
            out[new] = out.pop(old)
    return out
