"""envlock.image.engine: the one place a Docker client is made, checked and closed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envlock.errors import EnvironmentFailure, UsageError
from envlock.image import engine


class _Client:
    """What session() asks of a client: close()."""

    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_engine_errors_in_the_block_exit_3_naming_what_was_done() -> None:
    from docker.errors import APIError

    client = _Client()
    with (
        pytest.raises(EnvironmentFailure) as err,
        engine.session("during the build", client=client) as got,
    ):
        assert got is client
        raise APIError("500 Server Error: the engine broke\nsecond line")
    assert err.value.exit_code == 3
    assert err.value.message == (
        "the Docker Engine failed during the build: 500 Server Error: the engine broke"
    )
    assert err.value.hint == engine.FAILED_HINT
    assert client.closed is False  # a client given is the caller's to close


def test_other_errors_pass_through_the_block() -> None:
    client = _Client()
    with pytest.raises(UsageError, match="no image"), engine.session("x", client=client):
        raise UsageError("no image 'a:1' in this Docker Engine")
    with pytest.raises(KeyError), engine.session("x", client=client):
        raise KeyError("a bug stays a bug")


def test_an_unreachable_engine_exits_3_saying_how_to_start_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    socket = f"unix://{tmp_path}/no-engine.sock"
    monkeypatch.setenv("DOCKER_HOST", socket)
    with pytest.raises(EnvironmentFailure) as err, engine.session("x", timeout=5):
        pytest.fail("the block must not run without an engine")
    assert err.value.message.startswith(f"cannot reach the Docker Engine at {socket}: ")
    assert err.value.hint == engine.START_HINT


def test_importing_the_engine_module_imports_no_docker() -> None:
    sdk = "{'docker', 'requests'}"
    code = f"import sys, envlock.image.engine; print(sorted({sdk} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout == "[]\n", out.stderr
