"""Access to the data that ships inside the package: ``envlock/data/``.

Everything envlock reads as data lives in one folder of the package, installed
with it as package data (a wheel, an editable install and a source checkout
read the same files):

- ``envlock/data/matrices/``: the version matrices (``*.toml``);
- ``envlock/data/templates/``: the Jinja2 templates of a bundle and the report page;
- ``envlock/data/known_errors.toml``: the known errors of ``envlock doctor --log``.

Read through ``importlib.resources``, lazily, never at import time.
"""

from __future__ import annotations

import sys
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:  # pragma: no cover - Python 3.9 and 3.10
    from importlib.abc import Traversable

DATA = "data"
"""The package data folder inside ``envlock``."""

KNOWN_ERRORS = "known_errors.toml"


def data_root() -> Traversable:
    """The packaged ``envlock/data/`` folder."""
    return resources.files("envlock") / DATA


def data_dir(name: str) -> Traversable:
    """The packaged folder ``name`` ("templates" or "matrices") inside ``envlock/data/``."""
    return data_root() / name


def read_bytes(folder: str, filename: str) -> bytes:
    """The bytes of ``envlock/data/<folder>/<filename>``."""
    return (data_dir(folder) / filename).read_bytes()


def template_environment(**options: Any) -> Any:
    """A Jinja2 environment over ``envlock/data/templates/``: undefined names are
    errors, block tags leave no blank lines; ``options`` add to or override those
    (autoescape, delimiters, keep_trailing_newline)."""
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
