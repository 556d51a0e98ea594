"""One rule for Docker tests that cannot run: skip saying why, except under CI
(ENVLOCK_REQUIRE_DOCKER=1, set by tests/run.sh when CI=true), where it is a failure.
conftest.py applies it to the `docker` marker; tests that need more (their own
dockerd, a registry) call it themselves. And the two readers of `envlock smoke
--json` that test_smoke_docker and test_render_docker share. And the tests' own
builds through the SDK, built again where the engine's cache lookup raced with
another test's teardown (build_test_image)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from typing import Any, NoReturn

import pytest


def docker_unavailable(reason: str) -> NoReturn:
    if os.environ.get("ENVLOCK_REQUIRE_DOCKER") == "1":
        pytest.fail(f"Docker is required here (ENVLOCK_REQUIRE_DOCKER=1): {reason}")
    pytest.skip(reason)


def smoke_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    """``envlock smoke ARGV --json`` in this process: exit code, document, stderr."""
    from envlock.cli import main

    code = main(["smoke", *argv, "--json"])
    captured = capsys.readouterr()
    assert captured.out.startswith("{"), captured.err  # a document, or what stopped the run
    return code, json.loads(captured.out), captured.err


def checks(result: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """A smoke document's checks: name -> (status, reason)."""
    return {c["name"]: (c["status"], c["reason"]) for c in result["checks"]}


def engine_client(timeout: int) -> Iterator[Any]:
    """A Docker SDK client for a fixture to yield from (closed afterwards)."""
    import docker

    client = docker.from_env(timeout=timeout)
    yield client
    client.close()


def image_present(ref: str) -> bool:
    """Whether the engine has ``ref`` (an engine that does not answer says yes:
    that is docker_problem's to report)."""
    from docker.errors import ImageNotFound

    from envlock.errors import EnvironmentFailure
    from envlock.image import engine

    try:
        client = engine.connect(timeout=30)  # closes the socket of a failed connect
    except EnvironmentFailure:
        return True
    try:
        client.images.get(ref)
    except ImageNotFound:
        return False
    except Exception:
        return True
    finally:
        client.close()
    return True


def remove_repository(client: Any, repo: str, keep: str) -> None:
    """Remove every local image ``images.list(name=repo)`` finds, except that
    ``keep`` (the shared base image) only loses its tags in ``repo``. That list
    matches an image by a repo digest too: one that was pushed as ``repo:x`` and
    then lost the tag still appears, and removing it by id with force removes
    all its other tags with it (the base image, for every later test)."""
    kept = None
    with contextlib.suppress(Exception):
        kept = client.images.get(keep).id
    with contextlib.suppress(Exception):
        for image in client.images.list(name=repo):
            if image.id == kept:
                for tag in image.tags:
                    if tag.rpartition(":")[0] == repo:
                        remove_image(client, tag)
                continue
            with contextlib.suppress(Exception):
                client.images.remove(image.id, force=True)


def remove_image(client: Any, ref: str) -> None:
    """Untag or remove ``ref``; gone already is fine."""
    with contextlib.suppress(Exception):
        client.images.remove(ref, force=True)


def build_test_image(client: Any, **kwargs: Any) -> Any:
    """``client.images.build(**kwargs)``, built again (CACHE_RACE_TRIES times in all,
    a ``fileobj`` read from its start each time) where the engine's error is the
    classic builder's cache-lookup race (envlock.image.build.cache_lookup_race):
    another test's teardown removed a child of the base image while this build's
    cache lookup read the children (CI met it in stop 49, in envlock's own build)."""
    from docker.errors import BuildError

    from envlock.image.build import CACHE_RACE_TRIES, cache_lookup_race

    fileobj = kwargs.get("fileobj")
    for attempt in range(1, CACHE_RACE_TRIES + 1):
        if fileobj is not None:
            fileobj.seek(0)
        try:
            return client.images.build(**kwargs)
        except BuildError as e:
            if attempt == CACHE_RACE_TRIES or not cache_lookup_race(str(e.msg)):
                raise
    raise AssertionError("unreachable")
