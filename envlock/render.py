"""Render the bundle (Dockerfile, bootstrap.sh, ...) from a Lock.

Placeholder with the agreed signature (docs/contracts.md) so `envlock lock`
can call it while the templates are being written; issue #4 fills it in.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass

from envlock.model import Lock

EXECUTABLE: frozenset[str] = frozenset({"bootstrap.sh"})


@dataclass(frozen=True)
class RenderOptions:
    base_image: str | None = None
    base_digest: str | None = None
    os: str | None = None
    ca_cert: str | None = None


def add_render_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-image", help="FROM this image instead of the resolved nvidia/cuda tag")
    parser.add_argument("--base-digest", help="pin the base image to this sha256 digest")
    parser.add_argument("--ca-cert", help="PEM bundle to trust inside the build (TLS-intercepting networks)")


def options_from_args(args: argparse.Namespace) -> RenderOptions:
    return RenderOptions(
        base_image=getattr(args, "base_image", None),
        base_digest=getattr(args, "base_digest", None),
        os=getattr(args, "os", None),
        ca_cert=getattr(args, "ca_cert", None),
    )


def render_bundle(
    lock: Lock, options: RenderOptions, lock_files: Mapping[str, bytes]
) -> dict[str, str | bytes]:
    """Return {relative path: content} for every rendered bundle file."""
    return {}
