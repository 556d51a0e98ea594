"""The bake file `ci lock`/`ci matrix --format bake` write, read as buildx bake reads it.

There is no buildx here (Debian 12 ships none), so the tests do what bake does
with a JSON definition: parse it as JSON, take the ``default`` group's targets,
resolve each context against the working directory, which the docs make the
bake file's own folder (``cd DIR && docker buildx bake``), and build one target
through the Docker Engine API with its dockerfile, build args, labels and tag.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from docker_support import build_test_image

from envlock.ci.cells import bake_target, expand
from envlock.ci.formats import bake_file
from envlock.errors import UsageError

RANGE = "tensorflow>=2.14,<2.17"
REPO = "127.0.0.1:5000/envlock-bake"


def _rebased(cells: Any, base: str) -> list[Any]:
    return [
        dataclasses.replace(
            c,
            resolution=dataclasses.replace(c.resolution, base_image=base, base_image_digest=None),
        )
        for c in cells
    ]


def test_contexts_are_relative_to_the_bake_file_and_carry_cache_and_output() -> None:
    pushed = bake_file(expand(RANGE, repo=REPO).cells)
    local = bake_file(expand(RANGE).cells)
    for doc, output, repo in (
        (pushed, "type=registry", REPO),
        (local, "type=docker", "envlock-ci"),
    ):
        for name, t in doc["target"].items():
            cid = t["labels"]["io.envlock.cell"]
            assert name == bake_target(cid) and t["context"] == cid
            assert t["tags"] == [f"{repo}:{cid}"] and t["output"] == [output]
            assert t["cache-from"] == [f"type=gha,scope={name}"]
            assert t["cache-to"] == [f"type=gha,scope={name},mode=max"]
    # no registry namespace is assumed anywhere: without --repo, nothing is pushed
    assert "envlock/tensorflow" not in json.dumps(local)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("cuda", "12.${HOME}", "which buildx bake would interpolate"),
        ("cudnn", "8%{if true}x%{endif}", "which buildx bake would interpolate"),
        ("python", "3.11\u202e", "control character U+202E"),
        (
            "base_image",
            "envlock-test/bookworm-python:${TAG}",
            "which buildx bake would interpolate",
        ),
    ],
)
def test_a_value_bake_would_interpolate_is_refused(field: str, value: str, words: str) -> None:
    (cell,) = expand("tensorflow==2.15.1").cells
    bad = dataclasses.replace(
        cell, resolution=dataclasses.replace(cell.resolution, **{field: value})
    )
    with pytest.raises(UsageError) as e:
        bake_file([bad])
    assert words in e.value.message and "bake file: target " in e.value.message


def test_a_context_that_is_no_plain_name_is_refused() -> None:
    (cell,) = expand("tensorflow==2.15.1").cells
    for bad_id in ("../elsewhere", "a/b", "."):
        with pytest.raises(UsageError) as e:
            bake_file([dataclasses.replace(cell, id=bad_id)])
        assert "is not a plain folder or file name" in e.value.message


@pytest.mark.docker
def test_one_target_builds_through_the_engine_as_bake_reads_it(
    tmp_path: Path, base_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import docker

    cells = _rebased(expand(RANGE, repo=REPO).cells, base_image)
    folder = tmp_path / "made-here" / "cells"
    for cell in cells:  # a small bundle per cell: the build args and labels are the point
        (folder / cell.id).mkdir(parents=True)
        (folder / cell.id / "Dockerfile").write_text(
            "ARG BASE_IMAGE=nowhere.invalid/none:0\nFROM ${BASE_IMAGE}\n"
            f"RUN echo {cell.id} > /cell\n"
        )
    (folder / "docker-bake.json").write_text(json.dumps(bake_file(cells), indent=2) + "\n")

    # the folder moves (a checkout, an artifact): the file still works from its folder
    moved = tmp_path / "elsewhere"
    (tmp_path / "made-here").rename(moved)
    monkeypatch.chdir(moved / "cells")  # cd DIR
    doc = json.loads(Path("docker-bake.json").read_text())  # bake's default file name
    name = doc["group"]["default"]["targets"][1]
    target = doc["target"][name]
    context = Path(os.getcwd()) / target["context"]
    assert context.is_dir()

    client = docker.from_env(timeout=300)
    tag = f"{target['tags'][0]}-{time.time_ns()}"
    try:
        image, _ = build_test_image(
            client,
            path=str(context),
            dockerfile=target["dockerfile"],
            buildargs=target["args"],
            labels=target["labels"],
            tag=tag,
            network_mode="none",
            rm=True,
        )
        labels = image.attrs["Config"]["Labels"]
        assert labels["io.envlock.cell"] == target["context"]
        assert labels["io.envlock.cuda"] == target["labels"]["io.envlock.cuda"]
        base_id = client.images.get(base_image).id
        history = [h["Id"] for h in client.api.history(image.id)]
        assert base_id in history  # built FROM the BASE_IMAGE the file names
        out = client.containers.run(image.id, ["cat", "/cell"], remove=True, network_mode="none")
        assert out.decode().strip() == target["context"]
    finally:
        with contextlib.suppress(Exception):
            client.images.remove(tag, force=True)
        client.close()
