"""The OCI labels ``envlock build`` sets at build time: ``created`` (SOURCE_DATE_EPOCH
when set, so rebuilds stay reproducible), ``source`` and ``revision`` (git, else GitHub
Actions' variables), ``base.name`` and ``base.digest``."""

from __future__ import annotations

import datetime
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from envlock.errors import UsageError

OCI = "org.opencontainers.image."


def created_label(now: float | None = None) -> str:
    """RFC 3339 UTC time of the build: SOURCE_DATE_EPOCH when set, else now."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is not None and epoch.strip():
        if not epoch.strip().isdigit():
            raise UsageError(
                f"SOURCE_DATE_EPOCH={epoch!r} is not a number of seconds since 1970",
                hint="set it to an integer, e.g. SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)",
            )
        seconds = float(int(epoch.strip()))
    else:
        seconds = time.time() if now is None else now
    moment = datetime.datetime.fromtimestamp(int(seconds), tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _git(directory: Path, *argv: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(directory), *argv],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    out = done.stdout.strip()
    return out if done.returncode == 0 and out else None


def source_labels(directory: Path) -> dict[str, str]:
    """org.opencontainers.image.source / .revision: the git repository of ``directory``,
    else GitHub Actions' GITHUB_SERVER_URL, GITHUB_REPOSITORY and GITHUB_SHA; else none."""
    from envlock.door import redact

    labels: dict[str, str] = {}
    revision = _git(directory, "rev-parse", "--verify", "HEAD")
    if revision:
        labels[OCI + "revision"] = revision
        remote = _git(directory, "config", "--get", "remote.origin.url")
        if remote:
            labels[OCI + "source"] = redact(remote)
        return labels
    server, repository = os.environ.get("GITHUB_SERVER_URL"), os.environ.get("GITHUB_REPOSITORY")
    if server and repository:
        labels[OCI + "source"] = f"{server.rstrip('/')}/{repository}"
    sha = os.environ.get("GITHUB_SHA")
    if sha:
        labels[OCI + "revision"] = sha
    return labels


def base_labels(client: Any, base: str | None) -> dict[str, str]:
    """.base.name, and .base.digest where the reference pins one or the local image has a
    RepoDigest of the same repository."""
    from envlock.image import ref as imageref

    if not base:
        return {}
    ref = imageref.match(base)
    if ref is None:
        return {}
    labels = {OCI + "base.name": base}
    digest = ref.digest
    if digest is None:
        try:
            attrs = client.images.get(base).attrs or {}
        except Exception:  # noqa: BLE001 - not local: the FROM step pulls it or says why
            attrs = {}
        for repo_digest in attrs.get("RepoDigests") or ():
            known = imageref.match(str(repo_digest))
            if known is not None and known.repository == ref.repository and known.digest:
                digest = known.digest
                break
    if digest:
        labels[OCI + "base.digest"] = digest
    return labels
