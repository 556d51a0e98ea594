"""Constraints + matrix -> Resolution: what goes with a TensorFlow requirement.

``resolve`` is pure: it reads only the matrices it is given (or the packaged
ones, through the cache in ``envlock.matrix.cache``) and the constraints;
host detection (``--driver auto``) happens in ``envlock.commands.resolve``,
before it. The newest release that satisfies every constraint wins; when none
does, ``NoResolution`` says which constraint removed which releases and what
would work instead.

The flow, one module each:

- ``spec``: the SPEC, read by packaging (``==X.Y`` means the X.Y series).
- ``constraints``: the other values, checked; a Python older than the smoke
  harness runs on (``envlock.model.OLDEST_PYTHON``) is refused.
- ``stages``: the constraints a release must pass, in the order they are
  reported, each explaining its own failure.
- ``placement``: the CUDA source, base image, Ubuntu and Python a release
  runs with.
- ``explain``: the words: short forms, warnings, hints.
- ``resolution``: the run through the stages and the Resolution with its
  reasons.

Choices made here, with the reasons given in every Resolution: the matrix
holds final and post releases only (``envlock matrix refresh`` skips pre- and
dev-releases); yanked releases are used only when pinned exactly (PEP 592);
Python is the newest minor the release has Linux x86_64 wheels for (with the
``pip`` CUDA source: the newest of those every ``and-cuda`` requirement has a
wheel for; TensorFlow 2.14's tensorrt==8.5.3.1 has no cp311 wheel, so 2.14
with pip CUDA gets 3.10); the placement rules are in ``placement``.
"""

from __future__ import annotations

from envlock.matrix.cache import load_matrix
from envlock.model import Constraints, Gpu
from envlock.resolve.resolution import resolve
from envlock.resolve.spec import FRAMEWORK

__all__ = ["FRAMEWORK", "Constraints", "Gpu", "load_matrix", "resolve"]
