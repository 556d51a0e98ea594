"""Whether an unchanged cell of ``envlock ci build`` is reused, not rebuilt.

A cell's inputs (``cell_inputs``: its build context as the engine is sent it,
the build arguments, the base image as the engine holds it, the repository and
the RUN network) are hashed; when they equal those of its entry in the last
summary.json (``previous_cells``) and its image is still where that run left it
(the registry's manifest, the cell's tag, or the local image), ``reuse`` takes
that run's image, digest and report: not rebuilt, not re-signed, not
re-attached.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock.ci.evidence import OUTPUT_NAMES

if TYPE_CHECKING:
    from envlock.ci.options import CiBuildOptions
    from envlock.ci.summary import CellOutcome


def cell_inputs(folder: Path, options: CiBuildOptions) -> str:
    """sha256 over what decides a cell's image: the files of its build context as
    the engine is sent them (docker-py's own .dockerignore filter), the
    Dockerfile, the build arguments, the base image as the engine has it (its
    id and repo digests), the repository it is pushed to and the RUN network.
    ci build's own outputs in the folder (smoke.json, smoke.log, the report,
    the SBOM and its signed statement) never count, even where no .dockerignore
    keeps them out of the context."""
    import hashlib

    from docker.utils.build import exclude_paths

    from envlock.fsutil import sha256_file
    from envlock.image.dockerfile import MAX_DOCKERFILE, declared_args, final_base, read_dockerfile
    from envlock.readers import read_optional

    ignore = folder / ".dockerignore"
    patterns = []
    # as docker-py's APIClient.build reads it; one that is there but cannot be read
    # (a FIFO, over 1 MiB) is exit 2, not "no .dockerignore"
    raw = read_optional(ignore, limit=MAX_DOCKERFILE, hint=f"remove or fix {ignore}")
    if raw is not None:
        lines = raw.decode("utf-8", errors="replace").splitlines()
        patterns = [x.strip() for x in lines if x.strip() and not x.strip().startswith("#")]
    names = sorted(set(exclude_paths(str(folder), patterns, dockerfile="Dockerfile")))
    files: dict[str, str] = {}
    for name in [*names, "Dockerfile"]:
        if name in OUTPUT_NAMES:
            continue
        path = folder / name
        if path.is_file() and not path.is_symlink():  # streamed: nothing kept in memory
            files[name] = sha256_file(path)
    text = read_dockerfile(folder / "Dockerfile")
    declared = declared_args(text)
    args = {k: v for k, v in declared.items() if v is not None} | dict(options.build_args)
    if options.base_image is not None:
        args["BASE_IMAGE"] = options.base_image
    base = final_base(text, args) or args.get("BASE_IMAGE")
    doc = {
        "files": files,
        "build_args": dict(sorted(options.build_args.items())),
        "base_image": options.base_image,
        "base": _base_identity(base),
        "push": options.push,
        "network": options.network,
    }
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def _base_identity(base: str | None) -> dict[str, Any] | None:
    """The base image as the engine holds it: id and repo digests (None: not local)."""
    if not base:
        return None
    from envlock.image import engine

    try:
        with engine.session("while reading the base image", timeout=60) as client:
            image = client.images.get(base)
            attrs = image.attrs or {}
            return {
                "name": base,
                "id": image.id,
                "repo_digests": sorted(attrs.get("RepoDigests") or []),
            }
    except Exception:  # noqa: BLE001 - not local (the build pulls it): never reused
        return {"name": base, "id": None, "nonce": time.time_ns()}


def keyid(key: Path) -> str:
    from envlock.report import keys as keymod

    return keymod.keyid(keymod.load_private(key).public_key())


def reuse(
    outcome: CellOutcome,
    previous: Mapping[str, Any],
    options: CiBuildOptions,
    say: Callable[[str], None],
) -> bool:
    """Take the last run's image, digest and report when nothing changed and the
    image is still where it was left; False (and the cell is built) otherwise."""
    if not previous.get("ok") or previous.get("inputs") != outcome.inputs:
        return False
    image_id = previous.get("image_id")
    if not isinstance(image_id, str) or not image_id.startswith("sha256:"):
        return False
    signer = keyid(options.sign) if options.sign is not None else None
    report = previous.get("report")
    if signer is not None and (
        previous.get("signer") != signer
        or not isinstance(report, str)
        or not (outcome.folder.parent / report).is_file()
    ):
        return False
    pinned_text = previous.get("pinned")
    if options.push:
        if not isinstance(pinned_text, str) or not pinned_text:
            return False
        from envlock.image import ref as imageref
        from envlock.image import registry

        pinned = imageref.parse(pinned_text, "summary.json pinned")
        if pinned.repository != (outcome.image.repository if outcome.image else None):
            return False
        if registry.manifest_config_digest(pinned) != image_id:
            return False  # gone from the registry, or no longer that image
        if outcome.image is None or registry.tag_digest(outcome.image) != pinned.digest:
            return False  # the cell's tag was moved: push it again
        outcome.pinned, outcome.digest = pinned, pinned.digest
        outcome.attached = previous.get("attached")
        if signer is not None:  # the SBOM the kept report names, as the last run left it
            outcome.sbom = _text(previous.get("sbom"))
            outcome.sbom_digest = _text(previous.get("sbom_digest"))
            outcome.sbom_attached = _text(previous.get("sbom_attached"))
    elif not _local_image(image_id):
        return False
    outcome.image_id = image_id
    outcome.build = "reused"
    outcome.steps = str(previous.get("steps") or "")
    outcome.smoke = previous.get("smoke")
    outcome.report = report if signer is not None else None
    outcome.signer = signer
    where = str(outcome.pinned) if outcome.pinned else image_id[:19]
    say(
        f"unchanged since the last run (inputs {str(outcome.inputs)[:19]}): reusing {where}, "
        "not rebuilt, not re-signed, not re-attached"
    )
    return True


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _local_image(image_id: str) -> bool:
    from envlock.image import engine

    try:
        with engine.session("while looking for the image", timeout=60) as client:
            client.images.get(image_id)
            return True
    except Exception:  # noqa: BLE001 - gone (or unreadable): build again
        return False


MAX_SUMMARY = 16 * 1024 * 1024  # one row per cell: a few KB each


def previous_cells(directory: Path) -> dict[str, dict[str, Any]]:
    """The last summary.json's cells by id: {} when there is none, or it is not
    a summary of this schema (every cell is built again). One that is there but
    cannot be read (a FIFO, a device, over 16 MiB, no permission) is exit 2
    naming it: absent is not unreadable, and reuse must not guess."""
    from envlock.ci.summary import SCHEMA, SUMMARY_NAME
    from envlock.readers import JSONDefect, decode_json, read_optional

    path = directory / SUMMARY_NAME
    raw = read_optional(
        path,
        "the last run's",
        limit=MAX_SUMMARY,
        hint=f"remove {path} to build every cell again",
    )
    if raw is None:
        return {}
    try:
        doc = decode_json(raw.decode("utf-8"))
    except (UnicodeDecodeError, JSONDefect):
        return {}
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return {}
    cells = doc.get("cells")
    return {
        c["cell"]: c
        for c in (cells if isinstance(cells, list) else [])
        if isinstance(c, dict) and isinstance(c.get("cell"), str)
    }
