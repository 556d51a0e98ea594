"""Look up a local image's id (its config digest) through the Docker Engine API."""

from __future__ import annotations

from envlock.errors import UsageError


def local_image_id(ref: str) -> str:
    """The id of the local image ``ref``, with envlock's errors.

    An image id or digest given directly ("sha256:<hex>") is taken as it is,
    so a report can be checked without a daemon when the id is known.
    """
    from envlock.image import ref as imageref
    from envlock.report.result_check import HEX64

    if ref.startswith("sha256:") and HEX64.fullmatch(ref[7:]):
        return ref
    if imageref.match(ref) is None:
        # refused here, not by the engine: bad input is exit 2 with or without Docker
        raise UsageError(
            f"{ref!r} is neither an image reference nor an image id",
            hint=f"{imageref.HINT}, or an image id sha256:<64 hex>",
        )
    import docker.errors

    from envlock.image import engine

    with engine.session(f"looking up {ref!r}", timeout=30) as docker_client:
        try:
            image = docker_client.images.get(ref)
        except docker.errors.ImageNotFound as e:
            raise UsageError(
                f"no local image {ref!r}",
                hint="build it first ('envlock build DIR'), or pass the image id sha256:...",
            ) from e
        except docker.errors.APIError as e:
            if e.status_code is not None and 400 <= e.status_code < 500:
                raise UsageError(f"bad image reference {ref!r}: {e.explanation or e}") from e
            raise
    image_id: str = image.id
    return image_id
