"""envlock build for CI: --build-arg, --push to the real registry, OCI labels, plain progress.

The registry is the one tests/docker/setup.sh starts on 127.0.0.1:5000 (no
auth; the engine treats 127.0.0.0/8 as an insecure registry). Images are a few
kilobytes over the local base image; repositories carry this module's name.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envlock.cli import main
from envlock.errors import EnvironmentFailure, UsageError
from envlock.image import ref as imageref
from envlock.image.build import (
    BuildFailed,
    TrackedStep,
    _race_line,
    build_image,
    cache_lookup_race,
    step_line,
)
from envlock.image.dockerfile import declared_args, parse_build_args
from envlock.image.labels import created_label
from envlock.image.push import _push_failure, push, push_image

REGISTRY = "127.0.0.1:5000"
REPO = f"{REGISTRY}/envlock-push/build"
DEAD_SOCKET = "unix:///nonexistent/envlock-test-docker.sock"
EPOCH = "1700000000"
CREATED = "2023-11-14T22:13:20Z"
OCI = "org.opencontainers.image."

DOCKERFILE = """\
ARG BASE_IMAGE=envlock-test/bookworm-python:1
ARG UV_IMAGE=envlock-test/no-such-uv:0
FROM ${BASE_IMAGE}
ARG PIP_INDEX_URL
ARG UV_PYTHON_INSTALL_MIRROR
RUN echo "index=${PIP_INDEX_URL}" > /args.txt
"""


@pytest.fixture(autouse=True)
def reproducible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_SHA"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def docker_client() -> Iterator[Any]:
    import docker

    client = docker.from_env(timeout=300)
    yield client
    client.close()


@pytest.fixture
def cleanup(docker_client: Any) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for ref in reversed(made):
        with contextlib.suppress(Exception):  # already gone
            docker_client.images.remove(ref, force=True)


def bundle(folder: Path, dockerfile: str = DOCKERFILE, base_image: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if base_image:
        dockerfile = dockerfile.replace("envlock-test/bookworm-python:1", base_image)
    (folder / "Dockerfile").write_text(dockerfile)
    return folder


# ---------------------------------------------------------------- no engine needed


def test_declared_args_and_their_defaults() -> None:
    assert declared_args(DOCKERFILE) == {
        "BASE_IMAGE": "envlock-test/bookworm-python:1",
        "UV_IMAGE": "envlock-test/no-such-uv:0",
        "PIP_INDEX_URL": None,
        "UV_PYTHON_INSTALL_MIRROR": None,
    }


def test_the_rendered_dockerfile_declares_the_documented_arguments() -> None:
    from envlock.resources import read_bytes

    text = read_bytes("templates", "Dockerfile.j2").decode()
    for name in ("BASE_IMAGE", "UV_IMAGE", "PIP_INDEX_URL", "UV_PYTHON_INSTALL_MIRROR"):
        assert f"ARG {name}" in text


def test_parse_build_args() -> None:
    assert parse_build_args(["A=1", "B=", "C=x=y", "A=1"]) == {"A": "1", "B": "", "C": "x=y"}
    for bad in ("NOVALUE", "=v", "1A=v", "A B=v"):
        with pytest.raises(UsageError, match="expected NAME=VALUE"):
            parse_build_args([bad])
    with pytest.raises(UsageError, match="given twice"):
        parse_build_args(["A=1", "A=2"])


def test_created_label_from_source_date_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    assert created_label() == CREATED
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    assert created_label(now=0.0) == "1970-01-01T00:00:00Z"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(UsageError, match="SOURCE_DATE_EPOCH='yesterday'"):
        created_label()


def test_what_counts_as_the_cache_lookup_race() -> None:
    digest = "sha256:" + "0123abcd" * 8
    store = f"/var/lib/docker/image/overlay2/imagedb/content/sha256/{digest[7:]}"
    assert cache_lookup_race(f'unable to find image "{digest}"')
    assert cache_lookup_race(
        f"failed to get digest {digest}: open {store}: no such file or directory"
    )
    # a reference the Dockerfile names, a short id, a store error of another kind: not the race
    assert not cache_lookup_race('unable to find image "envlock-test/gone:1"')
    assert not cache_lookup_race(f'unable to find image "{digest[:19]}"')
    assert not cache_lookup_race(f"failed to get digest {digest}: open {store}: permission denied")
    assert not cache_lookup_race("No such image: envlock-test/gone:1")


def test_the_retry_line_names_the_step_or_that_none_had_started() -> None:
    reason = 'unable to find image "sha256:' + "0123abcd" * 8 + '"'
    at = BuildFailed("m", step="4/8", reason=reason)
    assert _race_line(at, 2) == (
        f"the engine lost an image during its build-cache lookup at step 4/8 ({reason}: "
        "another client removed it); building again, try 2 of 3\n"
    )
    assert "lookup before its first step (" in _race_line(BuildFailed("m", reason=reason), 3)


def test_step_line() -> None:
    step = TrackedStep(3, 12, "RUN  a \\\n  b", cached=True)
    assert step_line(step) == "step 3/12 RUN a \\ b (cached)"
    long = TrackedStep(1, 2, "RUN " + "x" * 300)
    assert len(step_line(long)) == len("step 1/2 ") + 120


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--build-arg", "NOPE"], "--build-arg 'NOPE': expected NAME=VALUE"),
        (
            ["--build-arg", "HTTP_PROXY=http://proxy:3128"],
            "--build-arg HTTP_PROXY: ",
        ),
        (
            ["--build-arg", "PIP_INDEX_URL=https://alice:s3cret@mirror.example/simple"],
            "the value is a URL with credentials",
        ),
        (
            ["--build-arg", "UV_PYTHON_INSTALL_MIRROR=https://token@mirror.example/py"],
            "the value is a URL with credentials",
        ),
        (["--build-arg", "UV_IMAGE=Not An Image"], "--build-arg UV_IMAGE 'Not An Image'"),
        (
            ["--base-image", "a/b:1", "--build-arg", "BASE_IMAGE=c/d:1"],
            "name different images",
        ),
        (["--push"], "--push needs --tag"),
        (["--push", "--tag", "envlock/x:1"], "names no registry host"),
        (
            ["--push", "--tag", f"{REPO}@sha256:{'a' * 64}"],
            "carries a digest; a push needs a tag",
        ),
    ],
)
def test_bad_input_exits_2_before_the_engine(
    tmp_path: Path,
    extra: list[str],
    words: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DOCKER_HOST", DEAD_SOCKET)  # never reached
    folder = bundle(tmp_path / "b")
    assert main(["build", str(folder), *extra]) == 2
    err = capsys.readouterr().err
    assert words in err
    assert "hint:" in err
    assert "s3cret" not in err and "token@" not in err
    assert "Traceback" not in err


def test_an_undeclared_build_arg_names_the_declared_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DOCKER_HOST", DEAD_SOCKET)
    folder = bundle(tmp_path / "b")
    assert main(["build", str(folder), "--build-arg", "HTTP_PROXY=x"]) == 2
    err = capsys.readouterr().err
    assert (
        "declares no such build argument (it declares: BASE_IMAGE, PIP_INDEX_URL, "
        "UV_IMAGE, UV_PYTHON_INSTALL_MIRROR)" in err
    )
    assert "hint: build arguments stay" not in err
    assert "history" not in err


def test_the_credentials_hint_says_why_and_what_instead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DOCKER_HOST", DEAD_SOCKET)
    folder = bundle(tmp_path / "b")
    url = "PIP_INDEX_URL=https://alice:s3cret@mirror.example/simple"
    assert main(["build", str(folder), "--build-arg", url]) == 2
    err = capsys.readouterr().err
    assert "build arguments stay readable in the image history" in err
    assert "netrc" in err and "secret" in err


def test_push_failures_are_exit_3_with_a_hint() -> None:
    tls = _push_failure(
        "10.1.2.3:5000/x:1",
        "10.1.2.3:5000",
        'Get "https://10.1.2.3:5000/v2/": http: server gave HTTP response to HTTPS client',
    )
    assert isinstance(tls, EnvironmentFailure)
    assert '"insecure-registries": ["10.1.2.3:5000"]' in (tls.hint or "")
    denied = _push_failure("ghcr.io/o/x:1", "ghcr.io", "denied: permission_denied")
    assert "docker login ghcr.io" in (denied.hint or "")
    missing = _push_failure(
        "127.0.0.1:5000/x:1", "127.0.0.1:5000", "An image does not exist locally with the tag: x"
    )
    assert isinstance(missing, UsageError) and "build it first" in (missing.hint or "")


# ---------------------------------------------------------------- the engine and the registry


@pytest.mark.docker
def test_build_args_reach_the_build(
    tmp_path: Path, base_image: str, docker_client: Any, cleanup: list[str]
) -> None:
    folder = bundle(tmp_path / "b", base_image=base_image)
    tag = "envlock-test/push-args:1"
    cleanup.append(tag)
    args = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple"}
    result = build_image(folder, tag=tag, build_args=args, network="none", progress="quiet")
    out = docker_client.containers.run(result.image_id, ["cat", "/args.txt"], remove=True)
    assert out.decode() == "index=http://127.0.0.1:9/simple\n"


RACE = 'unable to find image "sha256:' + "45830ad6" * 8 + '"'


class _RacingApi:
    """The real engine's low-level API client, except that its first ``fail`` builds
    stop after the engine's own ``Step 4/8`` line with ``error``. With RACE, that is
    what CI met (stop 49): moby's cache lookup (GetCachedImage) lists the children
    of a step's parent image and then reads each, and another test's teardown
    removed one in between. The race itself cannot be made to happen on demand: the
    removal has to land between two reads inside the engine."""

    def __init__(self, api: Any, fail: int, error: str) -> None:
        self._api = api
        self._fail = fail
        self._error = error
        self.builds = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)

    def build(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.builds += 1
        stream = self._api.build(**kwargs)
        if self.builds > self._fail:
            yield from stream
            return
        for chunk in stream:
            yield chunk
            if str(chunk.get("stream", "")).startswith("Step 4/8 "):
                break
        stream.close()
        yield {"errorDetail": {"message": self._error}, "error": self._error}


class _LookupRace:
    """The real engine's client with a _RacingApi as its ``api``; the rest is the
    client's own."""

    def __init__(self, client: Any, fail: int, error: str) -> None:
        self._client = client
        self.api = _RacingApi(client.api, fail, error)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.mark.docker
@pytest.mark.parametrize(
    ("fail", "error", "builds"),
    [(1, RACE, 2), (3, RACE, 3), (1, "No such image: envlock-test/gone:1", 1)],
    ids=["race-once", "race-every-time", "other-error"],
)
def test_the_cache_lookup_race_is_built_again_and_nothing_else_is(
    tmp_path: Path,
    base_image: str,
    docker_client: Any,
    cleanup: list[str],
    fail: int,
    error: str,
    builds: int,
) -> None:
    folder = bundle(tmp_path / "b", base_image=base_image)
    tag = "envlock-test/push-race:1"
    cleanup.append(tag)
    client = _LookupRace(docker_client, fail, error)
    lines: list[str] = []
    again = (
        "the engine lost an image during its build-cache lookup at step 4/8 "
        f"({RACE}: another client removed it); building again, try {{}} of 3\n"
    )
    if builds == 2:
        result = build_image(
            folder, tag=tag, network="none", progress="steps", client=client, out=lines.append
        )
        out = docker_client.containers.run(result.image_id, ["cat", "/args.txt"], remove=True)
        assert out.decode() == "index=\n"
        assert tag in result.tags
        # the first try's steps, the retry's line, then the second try's steps whole
        assert lines[3:5] == ["step 4/8 ARG PIP_INDEX_URL\n", again.format(2)]
        assert [line.split(" ", 2)[1] for line in lines[5:]] == [f"{n}/8" for n in range(1, 9)]
    else:
        with pytest.raises(EnvironmentFailure) as caught:
            build_image(
                folder, tag=tag, network="none", progress="steps", client=client, out=lines.append
            )
        assert caught.value.exit_code == 3
        assert str(caught.value).startswith(
            f"the build failed at step 4/8 (ARG PIP_INDEX_URL): {error}\n"
        )
        retries = [line for line in lines if not line.startswith("step ")]
        assert retries == ([again.format(2), again.format(3)] if error == RACE else [])
    assert client.api.builds == builds


@pytest.mark.docker
def test_plain_step_lines_without_a_tty_and_quiet_is_silent(
    tmp_path: Path, base_image: str, cleanup: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = bundle(tmp_path / "b", base_image=base_image)
    tag = "envlock-test/push-steps:1"
    cleanup.append(tag)
    assert main(["build", str(folder), "-t", tag, "--network", "none"]) == 0
    capsys.readouterr()
    assert main(["build", str(folder), "-t", tag, "--network", "none"]) == 0
    err = capsys.readouterr().err.splitlines()
    # the bundle is no git repository and this is no GitHub Actions run: two label steps
    assert err == [
        "step 1/8 ARG BASE_IMAGE=" + base_image,
        "step 2/8 ARG UV_IMAGE=envlock-test/no-such-uv:0",
        "step 3/8 FROM ${BASE_IMAGE}",
        "step 4/8 ARG PIP_INDEX_URL (cached)",
        "step 5/8 ARG UV_PYTHON_INSTALL_MIRROR (cached)",
        'step 6/8 RUN echo "index=${PIP_INDEX_URL}" > /args.txt (cached)',
        f"step 7/8 LABEL {OCI}base.name={base_image} (cached)",
        f"step 8/8 LABEL {OCI}created={CREATED} (cached)",
    ]
    assert main(["build", str(folder), "-t", tag, "--network", "none", "--progress", "quiet"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.docker
def test_fixed_source_date_epoch_rebuild_is_fully_cached_with_the_same_id(
    tmp_path: Path,
    base_image: str,
    cleanup: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = bundle(tmp_path / "b", base_image=base_image)
    tag = "envlock-test/push-epoch:1"
    cleanup.append(tag)
    first = build_image(folder, tag=tag, network="none", progress="quiet", no_cache=True)
    again = build_image(folder, tag=tag, network="none", progress="quiet")
    assert first.labels[OCI + "created"] == CREATED
    assert again.fully_cached and again.image_id == first.image_id
    # another time: only the label steps from `created` on run again, a new image id
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000001")
    later = build_image(folder, tag=tag, network="none", progress="quiet")
    assert later.labels[OCI + "created"] == "2023-11-14T22:13:21Z"
    assert later.image_id != first.image_id
    assert [s.instruction.split()[0] for s in later.steps if s.cacheable and not s.cached] == [
        "LABEL"
    ]
    # no SOURCE_DATE_EPOCH: now
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    before = time.time()
    now = build_image(folder, tag=tag, network="none", progress="quiet")
    stamp = now.labels[OCI + "created"]
    assert stamp.endswith("Z") and abs(_epoch(stamp) - before) < 60


def _epoch(stamp: str) -> float:
    import datetime

    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S%z").timestamp()


@pytest.mark.docker
def test_source_and_revision_from_git_or_github_actions(
    tmp_path: Path, base_image: str, cleanup: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    folder = bundle(repo / "env", base_image=base_image)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "bundle"], check=True)
    subprocess.run(
        [*git, "remote", "add", "origin", "https://bot:tok3n@git.example.invalid/team/envs.git"],
        check=True,
    )
    head = subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    tag = "envlock-test/push-git:1"
    cleanup.append(tag)
    result = build_image(folder, tag=tag, network="none", progress="quiet")
    assert result.labels[OCI + "revision"] == head
    assert result.labels[OCI + "source"] == "https://git.example.invalid/team/envs.git"

    plain = bundle(tmp_path / "plain", base_image=base_image)
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.example.invalid")
    monkeypatch.setenv("GITHUB_REPOSITORY", "team/envs")
    monkeypatch.setenv("GITHUB_SHA", "f" * 40)
    result = build_image(plain, tag=tag, network="none", progress="quiet")
    assert result.labels[OCI + "source"] == "https://github.example.invalid/team/envs"
    assert result.labels[OCI + "revision"] == "f" * 40
    for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_SHA"):
        monkeypatch.delenv(name)
    result = build_image(plain, tag=tag, network="none", progress="quiet")
    assert OCI + "source" not in result.labels and OCI + "revision" not in result.labels


@pytest.mark.docker
def test_push_then_pull_back_by_digest_and_base_digest_label(
    tmp_path: Path,
    base_image: str,
    docker_client: Any,
    cleanup: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    ref = f"{REPO}:small"
    cleanup.append(ref)
    nonce = f"RUN echo {time.time_ns()} > /nonce\n"  # an image no other test shares
    folder = bundle(tmp_path / "b", DOCKERFILE + nonce, base_image=base_image)
    code = main(["build", str(folder), "-t", ref, "--network", "none", "--push", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    doc = json.loads(captured.out)
    digest = doc["pushed"]["digest"]
    assert doc["pushed"] == {"ref": ref, "digest": digest, "pinned": f"{REPO}@{digest}"}
    assert digest.startswith("sha256:") and len(digest) == 71
    assert f"pushed {REPO}@{digest}" in captured.err  # push progress, not silence
    assert "push " in captured.err and ("Pushed" in captured.err or "exists" in captured.err)

    # the functions the ci build calls: the same digest for the same image, and
    # the pinned reference made from the parsed tag (never rebuilt from text)
    assert push_image(ref) == digest
    pushed = push(imageref.parse(ref))
    assert pushed.digest == digest and pushed.ref == imageref.parse(ref)
    assert pushed.pinned == imageref.ImageRef(REPO, None, digest)
    assert str(pushed.pinned) == f"{REPO}@{digest}" == doc["pushed"]["pinned"]

    # removed here, pulled back by digest: the same image
    image_id = doc["image_id"]
    docker_client.images.remove(ref)
    with contextlib.suppress(Exception):  # its repo digest, if still listed
        docker_client.images.remove(f"{REPO}@{digest}")
    with pytest.raises(Exception):  # noqa: B017, PT011 - docker's ImageNotFound
        docker_client.images.get(image_id)
    pulled = docker_client.images.pull(f"{REPO}@{digest}")
    cleanup.append(f"{REPO}@{digest}")
    assert pulled.id == image_id

    # built on the pulled image, which has a RepoDigest: base.digest is recorded
    child = bundle(tmp_path / "child", f"FROM {REPO}@{digest}\nRUN true\n")
    result = build_image(child, network="none", progress="quiet")
    cleanup.append(result.image_id)
    assert result.labels[OCI + "base.digest"] == digest
    tagged = bundle(tmp_path / "tagged", f"ARG BASE_IMAGE={ref}\nFROM $BASE_IMAGE\nRUN true\n")
    docker_client.images.get(image_id).tag(REPO, "small")
    result = build_image(tagged, network="none", progress="quiet")
    cleanup.append(result.image_id)
    assert result.labels[OCI + "base.name"] == ref
    assert result.labels[OCI + "base.digest"] == digest


@pytest.mark.docker
def test_an_unreachable_registry_is_exit_3(
    tmp_path: Path, base_image: str, cleanup: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    ref = "127.0.0.1:5999/envlock-push/nowhere:1"
    cleanup.append(ref)
    folder = bundle(tmp_path / "b", base_image=base_image)
    code = main(["build", str(folder), "-t", ref, "--network", "none", "--push"])
    err = capsys.readouterr().err
    assert code == 3
    assert f"the registry refused the push of {ref}" in err
    assert "hint: nothing answers at 127.0.0.1:5999" in err
    assert "Traceback" not in err


@pytest.mark.docker
def test_a_failing_uv_image_is_named_not_the_base_image(
    tmp_path: Path, base_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dockerfile = (
        f"ARG BASE_IMAGE={base_image}\n"
        "ARG UV_IMAGE=envlock-test/no-such-uv:0\n"
        "FROM ${UV_IMAGE} AS uv\n"
        "FROM ${BASE_IMAGE}\n"
        "COPY --from=uv /uv /usr/local/bin/uv\n"
    )
    folder = bundle(tmp_path / "b", dockerfile)
    assert main(["build", str(folder), "--network", "none"]) == 3
    err = capsys.readouterr().err
    assert "(FROM ${UV_IMAGE} AS uv, image envlock-test/no-such-uv:0)" in err
    assert "hint: the image envlock-test/no-such-uv:0 (UV_IMAGE) is neither local" in err
    assert "--build-arg UV_IMAGE=REF" in err
    assert "base image" not in err

    uv = "envlock-test/other-uv:1"
    assert main(["build", str(folder), "--build-arg", f"UV_IMAGE={uv}", "--network", "none"]) == 3
    err = capsys.readouterr().err
    assert f"image {uv})" in err and f"hint: the image {uv} (UV_IMAGE)" in err

    bad_base = "envlock-test/no-such-base:0"
    folder = bundle(tmp_path / "c", dockerfile.replace("${UV_IMAGE} AS uv", base_image + " AS uv"))
    assert main(["build", str(folder), "--base-image", bad_base, "--network", "none"]) == 3
    err = capsys.readouterr().err
    assert f"hint: the base image {bad_base} is neither local nor pullable" in err
