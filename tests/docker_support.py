"""One rule for Docker tests that cannot run: skip saying why, except under CI
(ENVLOCK_REQUIRE_DOCKER=1, set by tests/run.sh when CI=true), where it is a failure.
conftest.py applies it to the `docker` marker; tests that need more (their own
dockerd, a registry) call it themselves."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def docker_unavailable(reason: str) -> NoReturn:
    if os.environ.get("ENVLOCK_REQUIRE_DOCKER") == "1":
        pytest.fail(f"Docker is required here (ENVLOCK_REQUIRE_DOCKER=1): {reason}")
    pytest.skip(reason)
