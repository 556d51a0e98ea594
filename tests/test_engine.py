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


@pytest.mark.parametrize("listening", [False, True], ids=["no-socket", "socket-not-listening"])
def test_an_unreachable_engine_leaves_no_socket_to_the_garbage_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listening: bool
) -> None:
    """docker-py drops the socket of a connect that failed without closing it (a
    ResourceWarning whenever it is collected, in whatever test runs then)."""
    import gc
    import socket as sockets
    import warnings

    path = tmp_path / "engine.sock"
    if listening:  # bound, never listened on: connect is refused
        bound = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
        bound.bind(str(path))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with pytest.raises(EnvironmentFailure) as err:
                engine.connect(timeout=5)
            gc.collect()
    finally:
        if listening:
            bound.close()
    assert err.value.exit_code == 3
    assert err.value.message.startswith(f"cannot reach the Docker Engine at unix://{path}: ")
    assert [str(w.message) for w in seen if w.category is ResourceWarning] == []


def test_a_socket_this_user_may_not_open_says_how_to_join_the_docker_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root opens any socket here, so the refusal is the kernel's error raised in
    its place."""
    import socket as sockets

    def refused(self: sockets.socket, address: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(sockets.socket, "connect", refused)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/engine.sock")
    with pytest.raises(EnvironmentFailure) as err:
        engine.connect(timeout=5)
    assert err.value.message == (
        f"cannot reach the Docker Engine at unix://{tmp_path}/engine.sock: "
        "[Errno 13] Permission denied"
    )
    assert err.value.hint == engine.PERMISSION_HINT
    assert 'sudo usermod -aG docker "$USER"' in err.value.hint
