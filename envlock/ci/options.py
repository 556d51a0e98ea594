"""What ``envlock ci build`` is asked to do: its options, one frozen value.

Its own module because both the run (envlock.ci.build) and the decision to
reuse an unchanged cell (envlock.ci.reuse) read it, and reuse sits below the
run in the import graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class CiBuildOptions:
    jobs: int = 1
    push: str | None = None  # a repository with its registry host, no tag
    sign: Path | None = None  # private key
    base_image: str | None = None
    build_args: Mapping[str, str] = field(default_factory=dict)
    allow_cpu: bool = False
    network: str | None = None
    gpus: str = "all"
    smoke_timeout: float = 3600
    keep: bool = False  # keep the build-stage images (removed by default)
    heartbeat: float = 30.0  # seconds of silence before a cell says what it is doing
