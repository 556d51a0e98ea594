"""envlock: reproducible GPU TensorFlow environments.

Kept free of imports: ``envlock notebook install`` copies this file and
``envlock/notebook.py`` into a kernel's environment as the whole ``envlock``
package there (standard library only, Python 3.8 or newer).
"""

from __future__ import annotations

__version__ = "0.1.0"


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext envlock``: the ``%envlock`` line magic (envlock/notebook.py)."""
    from envlock.notebook import load_ipython_extension as load

    load(ipython)
