"""Look up a local image's id (its config digest) through the Docker Engine API."""

from __future__ import annotations

from envlock.errors import EnvironmentFailure, UsageError


def local_image_id(ref: str) -> str:
    """``docker.from_env().images.get(ref).id`` with envlock's errors.

    An image id or digest given directly ("sha256:<hex>") is taken as it is,
    so a report can be checked without a daemon when the id is known.
    """
    from envlock.report.statement import HEX64

    if ref.startswith("sha256:") and HEX64.fullmatch(ref[7:]):
        return ref
    import docker
    import docker.errors
    import requests

    try:
        client = docker.from_env(timeout=30)
    except docker.errors.DockerException as e:
        raise EnvironmentFailure(
            f"cannot reach the Docker Engine: {e}",
            hint="start dockerd, or check DOCKER_HOST",
        ) from e
    try:
        image = client.images.get(ref)
    except docker.errors.ImageNotFound as e:
        raise UsageError(
            f"no local image {ref!r}",
            hint="build it first ('envlock build DIR'), or pass the image id sha256:...",
        ) from e
    except docker.errors.APIError as e:
        if e.status_code is not None and 400 <= e.status_code < 500:
            raise UsageError(f"bad image reference {ref!r}: {e.explanation or e}") from e
        raise EnvironmentFailure(f"the Docker Engine failed looking up {ref!r}: {e}") from e
    except (docker.errors.DockerException, requests.RequestException) as e:
        raise EnvironmentFailure(
            f"cannot reach the Docker Engine: {e}", hint="start dockerd, or check DOCKER_HOST"
        ) from e
    finally:
        client.close()
    image_id: str = image.id
    return image_id
