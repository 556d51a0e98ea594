"""The cells as ``ci matrix`` prints them: a GitHub Actions matrix, a bake file, a list.

``github``: ``{"include": [cell, ...]}`` on one line, for ``strategy.matrix``
through ``fromJSON``. ``bake``: a docker-bake.json document: the group
``default`` naming every target, one target per cell (named by
``cells.bake_target``), its context the cell's bundle folder
``<dir>/<cell-id>``, dockerfile ``Dockerfile``, the cell's image tag, labels
(the cell and, once the cell is locked, ``io.envlock.lock.digest``, the
sha256 of its pylock.toml, the same label the Dockerfile sets) and the
``BASE_IMAGE`` build argument. ``json``: the plain list of cells.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from envlock.ci.cells import Cell, bake_target

FORMATS = ("github", "bake", "json")


def github_matrix(cells: Sequence[Cell]) -> str:
    """One line of JSON for ``strategy.matrix: ${{ fromJSON(...) }}``."""
    return json.dumps({"include": [c.to_dict() for c in cells]}, separators=(",", ":"))


def cell_labels(cell: Cell, lock_digest: str | None = None) -> dict[str, str]:
    r = cell.resolution
    labels = {
        "io.envlock.cell": cell.id,
        "io.envlock.framework": r.framework,
        "io.envlock.framework.version": r.version,
        "io.envlock.python": r.python,
        "io.envlock.cuda": r.cuda,
        "io.envlock.cudnn": r.cudnn,
        "io.envlock.cuda-source": r.cuda_source,
    }
    if lock_digest:
        labels["io.envlock.lock.digest"] = lock_digest
    return labels


def bake_file(
    cells: Sequence[Cell], folder: str, digests: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The docker-bake.json document; ``digests``: lock digest ("sha256:...") by cell id."""
    digests = digests or {}
    targets: dict[str, Any] = {}
    for cell in cells:
        targets[bake_target(cell.id)] = {
            "context": str(PurePosixPath(folder) / cell.id),
            "dockerfile": "Dockerfile",
            "tags": [cell.image_tag],
            "labels": cell_labels(cell, digests.get(cell.id)),
            "args": {"BASE_IMAGE": cell.base_image},
        }
    return {"group": {"default": {"targets": list(targets)}}, "target": targets}


def cell_list(cells: Sequence[Cell], digests: Mapping[str, str] | None = None) -> list[Any]:
    out = []
    for cell in cells:
        row = cell.to_dict()
        if digests and cell.id in digests:
            row["lock_digest"] = digests[cell.id]
        out.append(row)
    return out
