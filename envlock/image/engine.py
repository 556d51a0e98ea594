"""The Docker Engine client, in one place: made, checked, closed; failures exit 3.

``envlock build``, ``envlock smoke IMAGE`` and the image look-up of
``report sign`` / ``verify`` all talk to the engine through ``session()``.
docker-py (and requests beneath it) is imported inside these functions only,
so ``envlock resolve`` and ``envlock smoke --host`` never load it: GPU hosts
often lack the SDK. (Not named docker.py: that would shadow the SDK.)
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from typing import Any

from envlock.errors import EnvironmentFailure

DEFAULT_HOST = "unix:///var/run/docker.sock"
START_HINT = (
    "start one (`sudo systemctl start docker`, or `sudo dockerd &`; tests/docker/setup.sh "
    "does it here) or point DOCKER_HOST at a running engine"
)
FAILED_HINT = "check `docker info`; the engine may have stopped"
PERMISSION_HINT = (
    'this user may not open the engine\'s socket: `sudo usermod -aG docker "$USER"`, '
    "then log in again (or run envlock with sudo)"
)


def engine_errors() -> tuple[type[Exception], ...]:
    """What docker-py raises when the engine fails or cannot be reached."""
    from docker.errors import DockerException
    from requests.exceptions import RequestException

    return (DockerException, RequestException)


def short(exc: BaseException) -> str:
    """The first line of an error, at most 400 characters."""
    text = str(exc).strip().splitlines()
    return text[0][:400] if text else type(exc).__name__


def connect(timeout: int = 600) -> Any:
    """A docker-py client whose engine answered a ping, or EnvironmentFailure (exit 3)."""
    import docker

    where = os.environ.get("DOCKER_HOST") or DEFAULT_HOST
    _probe_unix_socket(where, timeout)
    client = None
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except engine_errors() as e:
        if client is not None:  # its socket, else a ResourceWarning later
            client.close()
        raise EnvironmentFailure(
            f"cannot reach the Docker Engine at {where}: {short(e)}", hint=START_HINT
        ) from e
    return client


def _probe_unix_socket(where: str, timeout: int) -> None:
    """A unix socket no engine answers on is found here, with a socket that is
    closed either way: docker-py leaves the socket of a failed connect to the
    garbage collector (a ResourceWarning wherever it is collected; the fix,
    docker/docker-py pull request 3356, is not released). Other hosts (tcp://,
    ssh://) go to docker-py as they are."""
    if not where.startswith("unix://"):
        return
    path = where.removeprefix("unix://")
    if not path.startswith("/"):  # as docker-py reads unix://var/run/docker.sock
        path = "/" + path
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(min(timeout, 30))
            probe.connect(path)
    except OSError as e:
        hint = PERMISSION_HINT if isinstance(e, PermissionError) else START_HINT
        raise EnvironmentFailure(
            f"cannot reach the Docker Engine at {where}: {short(e)}", hint=hint
        ) from e


@contextlib.contextmanager
def session(
    doing: str, *, timeout: int = 600, client: Any = None, hint: str = FAILED_HINT
) -> Iterator[Any]:
    """A client for the ``with`` block.

    An engine error that leaves the block becomes EnvironmentFailure (exit 3):
    "the Docker Engine failed {doing}: ...". Errors the block maps itself (an
    image that is not there is the user's mistake) pass through. A ``client``
    given is used and left open; one made here is closed at the end.
    """
    active = client if client is not None else connect(timeout)
    try:
        yield active
    except engine_errors() as e:
        raise EnvironmentFailure(f"the Docker Engine failed {doing}: {short(e)}", hint=hint) from e
    finally:
        if client is None:
            active.close()
