"""Image references as Docker and registries write them: [host[:port]/]path[:tag][@sha256:hex].

One parser for every command that names an image (build --tag/--push/--base-image,
smoke, report sign --image, verify --image, ci build). The grammar is the
distribution project's reference grammar, reduced to what envlock accepts: the
only digest algorithm is sha256. A first component with a dot or a colon, or
``localhost``, is a registry host (as Docker decides it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from envlock.errors import UsageError

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REFERENCE = re.compile(
    r"^(?P<repository>(?:(?P<host>[A-Za-z0-9.-]+(?::[0-9]+)?)/)?"
    rf"{_COMPONENT}(?:/{_COMPONENT})*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)
HINT = "use lowercase [host[:port]/]name[:tag][@sha256:<64 hex>], e.g. envlock/tf:2.15.1"


@dataclass(frozen=True)
class ImageRef:
    repository: str  # "127.0.0.1:5000/envlock/tf", with the registry host when one was named
    tag: str | None = None
    digest: str | None = None  # "sha256:<64 hex>", a manifest digest

    @property
    def registry(self) -> str | None:
        """The registry host ("127.0.0.1:5000"), or None for Docker's default."""
        first, sep, _ = self.repository.partition("/")
        if sep and ("." in first or ":" in first or first == "localhost"):
            return first
        return None

    @property
    def path(self) -> str:
        """The repository without its registry host ("envlock/tf")."""
        host = self.registry
        return self.repository[len(host) + 1 :] if host else self.repository

    @property
    def pinned(self) -> str | None:
        """repository@digest, the form that names one manifest everywhere."""
        return f"{self.repository}@{self.digest}" if self.digest else None

    def with_digest(self, digest: str) -> ImageRef:
        return replace(self, digest=digest)

    def at(self, digest: str) -> ImageRef:
        """``repository@digest`` (no tag): the manifest a push of this tag answered with."""
        return ImageRef(self.repository, None, digest)

    def with_tag(self, tag: str | None) -> ImageRef:
        return replace(self, tag=tag)

    def __str__(self) -> str:
        text = self.repository
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def match(value: str) -> ImageRef | None:
    """The reference ``value`` names, or None when it is not one."""
    m = _REFERENCE.match(value)
    if not m or len(m.group("repository")) > 255:
        return None
    return ImageRef(m.group("repository"), m.group("tag"), m.group("digest"))


def parse(value: str | ImageRef, what: str = "image reference") -> ImageRef:
    """The reference ``value`` names, or UsageError (exit 2) saying which option was wrong.

    An ``ImageRef`` is already parsed and comes back as it is: stages pass the
    object on, and only text from the command line or a file is parsed.
    """
    if isinstance(value, ImageRef):
        return value
    ref = match(value)
    if ref is None:
        raise UsageError(f"{what} {value!r} is not a valid image reference", hint=HINT)
    return ref
