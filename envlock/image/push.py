"""Push a built image's tag to its registry through the Docker Engine API (docker-py)
and return the manifest digest the registry answered with.

The engine sends the credentials ``docker login`` stored (docker-py reads them);
docker-py is imported inside the functions that use it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from envlock.errors import EnvironmentFailure, EnvlockError, UsageError
from envlock.image.ref import ImageRef


@dataclass(frozen=True)
class Pushed:
    """A pushed tag and the manifest digest the registry answered with."""

    ref: ImageRef  # 127.0.0.1:5000/envlock/tf:2.15.1
    digest: str  # "sha256:<64 hex>"

    @property
    def pinned(self) -> ImageRef:
        """repository@digest: the reference that names the pushed manifest everywhere."""
        return self.ref.at(self.digest)

    def to_dict(self) -> dict[str, str]:
        return {"ref": str(self.ref), "digest": self.digest, "pinned": str(self.pinned)}


def check_push_reference(ref: str | ImageRef, what: str = "--tag") -> ImageRef:
    """The ImageRef to push: a registry host and a tag (or UsageError, exit 2)."""
    from envlock.image import ref as imageref

    parsed = imageref.parse(ref, what)
    ref = str(parsed)
    if parsed.registry is None:
        raise UsageError(
            f"{what} {ref!r} names no registry host, so there is nowhere to push it",
            hint="tag it HOST[:PORT]/NAME:TAG, e.g. --tag ghcr.io/OWNER/tf:2.15.1 "
            "or 127.0.0.1:5000/envlock/tf:2.15.1",
        )
    if parsed.digest is not None:
        raise UsageError(
            f"{what} {ref!r} carries a digest; a push needs a tag",
            hint="push HOST/NAME:TAG; the registry answers with the digest",
        )
    return parsed


@dataclass
class PushProgress:
    """Bytes sent so far, per layer, as the engine's push stream reports them
    (``progressDetail``); ``ci build``'s heartbeat prints ``line()``."""

    current: dict[str, int] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)

    def feed(self, chunk: dict[str, Any]) -> None:
        layer = str(chunk.get("id") or "")
        if not layer:
            return
        status = str(chunk.get("status") or "")
        detail = chunk.get("progressDetail")
        if isinstance(detail, dict):
            cur, tot = detail.get("current"), detail.get("total")
            if isinstance(cur, int):
                self.current[layer] = cur
            if isinstance(tot, int) and tot > 0:
                self.total[layer] = tot
        if status in _PUSH_DONE or status.startswith("Mounted from"):
            self.done.add(layer)
            if layer in self.total:
                self.current[layer] = self.total[layer]
        elif status in ("Preparing", "Waiting"):
            self.current.setdefault(layer, 0)

    def line(self) -> str:
        sent = sum(self.current.values())
        total = sum(self.total.values())
        layers = len(set(self.current) | self.done)
        of = f" of {_mb(total)}" if total else ""
        return f"{_mb(sent)} sent{of}, {len(self.done)}/{layers} layers done"


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def push(
    ref: str | ImageRef,
    *,
    client: Any = None,
    out: Callable[[str], None] | None = None,
    progress: PushProgress | None = None,
) -> Pushed:
    """Push the local tag ``ref``; the pushed reference and its manifest digest."""
    parsed = check_push_reference(ref, "image")
    return Pushed(parsed, push_image(parsed, client=client, out=out, progress=progress))


def push_image(
    ref: str | ImageRef,
    *,
    client: Any = None,
    out: Callable[[str], None] | None = None,
    progress: PushProgress | None = None,
) -> str:
    """Push the local tag ``ref`` to its registry; return the manifest digest ("sha256:<hex>").

    Progress (one line per layer as it finishes, then the digest) goes to ``out``;
    ``progress`` is fed every chunk (bytes sent per layer).
    A registry that refuses or cannot be reached is EnvironmentFailure (exit 3);
    a reference without a registry host, or a tag that is not local, is UsageError.
    """
    from envlock.image import engine

    parsed = check_push_reference(ref, "image")
    ref = str(parsed)
    tag = parsed.tag or "latest"
    emit = out or (lambda s: None)
    digest: str | None = None
    doing = f"while pushing {ref}"
    with engine.session(doing, timeout=3600, client=client, hint=_PUSH_HINT) as docker_client:
        from docker.errors import APIError

        try:
            stream = docker_client.api.push(parsed.repository, tag=tag, stream=True, decode=True)
            for chunk in stream:
                if not isinstance(chunk, dict):
                    continue
                if "error" in chunk or "errorDetail" in chunk:
                    detail = chunk.get("errorDetail") or {}
                    message = str(chunk.get("error") or detail.get("message") or "unknown error")
                    raise _push_failure(ref, parsed.registry, message.strip())
                if progress is not None:
                    progress.feed(chunk)
                aux = chunk.get("aux")
                if isinstance(aux, dict) and aux.get("Digest"):
                    digest = str(aux["Digest"])
                status = str(chunk.get("status") or "")
                if status in _PUSH_DONE or status.startswith("Mounted from"):
                    emit(f"push {chunk.get('id', '')} {status}".replace("  ", " ") + "\n")
        except APIError as e:
            explanation = str(getattr(e, "explanation", "") or e)
            raise _push_failure(ref, parsed.registry, explanation) from e
    if not digest or not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise EnvironmentFailure(
            f"the registry {parsed.registry} answered the push of {ref} without a manifest digest",
            hint=_PUSH_HINT,
        )
    emit(f"pushed {parsed.at(digest)}\n")
    return digest


_PUSH_DONE = ("Pushed", "Layer already exists")
_PUSH_HINT = "check that the registry is running and reachable from the Docker Engine"


def _push_failure(ref: str, registry: str | None, message: str) -> EnvlockError:
    text = message.lower()
    if "does not exist locally" in text or "no such image" in text:
        return UsageError(
            f"cannot push {ref}: {message}",
            hint="build it first with `envlock build DIR --tag " + ref + "`",
        )
    hint = _PUSH_HINT
    if "http response to https client" in text or "x509" in text or "tls" in text:
        hint = (
            f"the registry {registry} does not speak TLS the engine trusts: serve it with TLS, or "
            f'list it in the daemon\'s /etc/docker/daemon.json as "insecure-registries": '
            f'["{registry}"] and restart dockerd (127.0.0.0/8 is insecure by default)'
        )
    elif "denied" in text or "unauthorized" in text or "authentication required" in text:
        hint = f"log in first (`docker login {registry}`) and check that you may push there"
    elif "connection refused" in text or "no such host" in text or "timeout" in text:
        hint = f"nothing answers at {registry}: start the registry or fix the host name"
    return EnvironmentFailure(f"the registry refused the push of {ref}: {message}", hint=hint)
