"""Access to the data that ships inside the package (templates/, matrices/).

In a built wheel both folders live inside the ``envlock`` package (hatch
force-include maps them); in a source checkout or an editable install they are
the top-level folders of the repository. Read lazily, never at import time.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:  # pragma: no cover - Python 3.9 and 3.10
    from importlib.abc import Traversable


def data_dir(name: str) -> Traversable:
    """Return the packaged folder ``name`` ("templates" or "matrices")."""
    packaged = resources.files("envlock") / name
    if packaged.is_dir():
        return packaged
    source = Path(__file__).resolve().parent.parent / name
    return source


def read_bytes(folder: str, filename: str) -> bytes:
    return (data_dir(folder) / filename).read_bytes()


def template_environment(**options: Any) -> Any:
    """A Jinja2 environment over ``templates/``: undefined names are errors, block
    tags leave no blank lines; ``options`` add to or override those (autoescape,
    delimiters, keep_trailing_newline)."""
    import jinja2

    folder = data_dir("templates")

    def load(name: str) -> str:
        path = folder / name
        if not path.is_file():
            raise jinja2.TemplateNotFound(name)
        return path.read_text(encoding="utf-8")

    settings: dict[str, Any] = {
        "undefined": jinja2.StrictUndefined,
        "trim_blocks": True,
        "lstrip_blocks": True,
        **options,
    }
    return jinja2.Environment(loader=jinja2.FunctionLoader(load), **settings)
