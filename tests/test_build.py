"""envlock build: the Docker Engine API build of a folder, on small test Dockerfiles.

The TensorFlow bundle itself is built in tests/test_smoke_docker.py; here the
context rules, the cache accounting and the failure paths are shown on images
of a few kilobytes over the local base image.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envlock.cli import main
from envlock.image.build import BuildStep, _StepTracker, build_image

TAG = "envlock-test/h5-build:1"
DEAD_SOCKET = "unix:///nonexistent/envlock-test-docker.sock"
EPOCH = "1700000000"  # 2023-11-14T22:13:20Z
CREATED = "2023-11-14T22:13:20Z"
GITHUB_VARS = ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_SHA")


@pytest.fixture(autouse=True)
def reproducible(monkeypatch: pytest.MonkeyPatch) -> None:
    """Builds here are reproducible (a fixed created label) and not on GitHub Actions."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    for name in GITHUB_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def docker_client() -> Iterator[Any]:
    import docker

    client = docker.from_env(timeout=120)
    yield client
    client.close()


@pytest.fixture
def cleanup(docker_client: Any) -> Iterator[list[str]]:
    """Images the test made, removed afterwards."""
    made: list[str] = []
    yield made
    for ref in reversed(made):
        with contextlib.suppress(Exception):  # already gone
            docker_client.images.remove(ref, force=True)


def write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def context_dir(tmp_path: Path, base_image: str) -> Path:
    (tmp_path / "outside.txt").write_text("not in the context\n")
    return write(
        tmp_path / "bundle",
        {
            "Dockerfile": (
                f"ARG BASE_IMAGE={base_image}\n"
                "FROM ${BASE_IMAGE}\n"
                "ARG BASE_IMAGE\n"
                'LABEL io.envlock.framework="none" '
                'org.opencontainers.image.base.name="${BASE_IMAGE}"\n'
                "COPY . /ctx/\n"
                "RUN ls -A /ctx > /ctx.list\n"
            ),
            ".dockerignore": "secret.txt\n*.tmp\n",
            "kept.txt": "in the context\n",
            "secret.txt": "must not reach the engine\n",
            "scratch.tmp": "ignored too\n",
        },
    )


@pytest.mark.docker
def test_build_context_labels_and_a_fully_cached_rebuild(
    tmp_path: Path,
    base_image: str,
    docker_client: Any,
    cleanup: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    bundle = context_dir(tmp_path, base_image)
    cleanup.append(TAG)
    code = main(["build", str(bundle), "--tag", TAG, "--network", "host", "--json", "--no-cache"])
    first = json.loads(capsys.readouterr().out)
    assert code == 0
    assert first["image_id"].startswith("sha256:")
    assert first["tags"] == [TAG]
    assert first["labels"]["io.envlock.framework"] == "none"
    assert first["labels"]["org.opencontainers.image.base.name"] == base_image
    assert first["labels"]["org.opencontainers.image.created"] == CREATED
    # the build-time labels come last, one step each, in the order of their names
    assert [s["instruction"] for s in first["steps"]][3:] == [
        'LABEL io.envlock.framework="none" org.opencontainers.image.base.name="${BASE_IMAGE}"',
        "COPY . /ctx/",
        "RUN ls -A /ctx > /ctx.list",
        f"LABEL org.opencontainers.image.base.name={base_image}",
        f"LABEL org.opencontainers.image.created={CREATED}",
    ]
    assert [s["instruction"].split()[0] for s in first["steps"]][:3] == ["ARG", "FROM", "ARG"]
    assert first["cacheable_steps"] == 6 and first["cached_steps"] == 0
    listing = docker_client.containers.run(
        first["image_id"], ["cat", "/ctx.list"], remove=True, network_mode="none"
    )
    assert sorted(listing.decode().split()) == [".dockerignore", "Dockerfile", "kept.txt"]

    code = main(["build", str(bundle), "--tag", TAG, "--network", "host", "--json"])
    again = json.loads(capsys.readouterr().out)
    assert code == 0
    assert again["image_id"] == first["image_id"]
    assert again["fully_cached"] is True
    assert again["cached_steps"] == again["cacheable_steps"] == 6
    assert again["seconds"] <= 5.0
    assert "---> Using cache" in "\n".join(again["log_tail"])

    (bundle / "kept.txt").write_text("changed\n")
    result = build_image(bundle, tag=TAG, network="host", progress="quiet")
    assert not result.fully_cached
    cached = [s.cached for s in result.steps if s.cacheable]
    assert cached == [True, True, False, False, False, False]


@pytest.mark.docker
def test_base_image_override_goes_in_as_build_arg(
    tmp_path: Path, base_image: str, cleanup: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = context_dir(tmp_path, "envlock-test/not-there:0")
    cleanup.append(TAG)
    code = main(["build", str(bundle), "-t", TAG, "--base-image", base_image, "--network", "host"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("built sha256:")
    assert f"({TAG})" in out.splitlines()[0]
    result = build_image(bundle, base_image=base_image, network="host", progress="quiet")
    assert result.labels["org.opencontainers.image.base.name"] == base_image
    assert result.fully_cached


@pytest.mark.docker
def test_a_failing_run_step_exits_3_with_the_step_and_its_log(
    tmp_path: Path, base_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = write(
        tmp_path / "b",
        {
            "Dockerfile": (
                f"FROM {base_image}\n"
                "RUN echo fine\n"
                "RUN echo about to fail && echo really && exit 7\n"
                "RUN echo never\n"
            )
        },
    )
    code = main(["build", str(bundle), "--network", "host", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 3
    assert "the build failed at step 3/6 (RUN echo about to fail && echo really && exit 7)" in err
    assert "returned a non-zero code: 7" in err
    assert "  | about to fail\n  | really\n" in err
    assert "never" not in err
    assert "Traceback" not in err


@pytest.mark.docker
def test_a_step_without_network_says_to_use_network_host(
    tmp_path: Path, base_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """What `envlock build` of a bundle without --network host gives on a daemon
    started with --bridge=none: pip cannot resolve the index's name."""
    bundle = write(
        tmp_path / "b",
        {
            "Dockerfile": (
                f"FROM {base_image}\n"
                "RUN python3 -c \"import socket; socket.getaddrinfo('index.invalid', 443)\"\n"
            )
        },
    )
    code = main(["build", str(bundle), "--network", "none", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 3
    assert "the build failed at step 2/4" in err
    assert "socket.gaierror" in err
    assert "hint: a RUN step could not reach the network" in err
    assert "rerun with --network host" in err
    assert 'Traceback (most recent call last):\n  File "/work' not in err  # not envlock's own


@pytest.mark.docker
def test_a_missing_base_image_names_the_from_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = write(tmp_path / "b", {"Dockerfile": "FROM envlock-test/does-not-exist:0\nRUN true\n"})
    code = main(["build", str(bundle)])
    err = capsys.readouterr().err
    assert code == 3
    assert "step 1/4 (FROM envlock-test/does-not-exist:0)" in err
    assert "hint: the image envlock-test/does-not-exist:0 is neither local nor pullable" in err


def test_an_unreachable_daemon_exits_3_saying_how_to_start_one(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DOCKER_HOST", DEAD_SOCKET)
    bundle = write(tmp_path / "b", {"Dockerfile": "FROM scratch\n"})
    code = main(["build", str(bundle)])
    err = capsys.readouterr().err
    assert code == 3
    assert f"cannot reach the Docker Engine at {DEAD_SOCKET}" in err
    assert "hint: start one" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("files", "extra", "words"),
    [
        (None, [], "no such folder"),
        ({}, [], "no Dockerfile in this folder"),
        (
            {"Dockerfile": "FROM scratch\n"},
            ["--tag", "Not A Tag"],
            "is not a valid image reference",
        ),
        (
            {"Dockerfile": "FROM scratch\n"},
            ["--base-image", "x:y:z"],
            "not a valid image reference",
        ),
        (
            {"Dockerfile": "FROM scratch\n"},
            ["--base-image", "envlock-test/other:1"],
            "takes no BASE_IMAGE build argument",
        ),
    ],
)
def test_bad_input_exits_2(
    tmp_path: Path,
    files: dict[str, str] | None,
    extra: list[str],
    words: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # checked before any engine is contacted: a dead socket proves it
    monkeypatch.setenv("DOCKER_HOST", DEAD_SOCKET)
    folder = tmp_path / "bundle"
    if files is not None:
        write(folder, files)
    assert main(["build", str(folder), *extra]) == 2
    err = capsys.readouterr().err
    assert words in err
    assert "hint:" in err


def test_a_file_is_not_a_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    assert main(["build", str(tmp_path / "Dockerfile")]) == 2
    assert "not a folder" in capsys.readouterr().err


CLASSIC_LOG = [
    "Step 1/6 : ARG BASE_IMAGE=envlock-test/bookworm-python:1\n",
    "Step 2/6 : FROM ${BASE_IMAGE} AS build\n",
    " ---> 800c8dd57784\n",
    "Step 3/6 : RUN python3 -m venv /opt/venv\n",
    " ---> Using cache\n ---> 1cb703dc8c8c\n",
    "Step 4/6 : COPY requirements.txt /tmp/",
    "r.txt\n",
    " ---> 7e2f5ba1ef7d\n",
    "Step 5/6 : FROM ${BASE_IMAGE} AS runtime\n ---> 800c8dd57784\n",
    "Step 6/6 : ARG BASE_IMAGE\n",
    " ---> Using cache\n",
    " ---> b03f56f300d1\n",
    "Successfully built b03f56f300d1\n",
]


def test_step_tracker_follows_the_classic_builder_stream() -> None:
    tracker = _StepTracker()
    for chunk in CLASSIC_LOG:
        tracker.feed_text(chunk)
    tracker.flush()
    steps = [s.frozen() for s in tracker.steps]
    assert steps == [
        BuildStep(1, "ARG BASE_IMAGE=envlock-test/bookworm-python:1", False, False),
        BuildStep(2, "FROM ${BASE_IMAGE} AS build", False, False),
        BuildStep(3, "RUN python3 -m venv /opt/venv", True, True),
        BuildStep(4, "COPY requirements.txt /tmp/r.txt", False, True),
        BuildStep(5, "FROM ${BASE_IMAGE} AS runtime", False, False),
        BuildStep(6, "ARG BASE_IMAGE", True, True),
    ]
    assert tracker.image_id == "b03f56f300d1"
    assert tracker.log[-1] == "Successfully built b03f56f300d1"
