"""The one error tree of envlock.

Library code raises these; only ``envlock.cli`` turns them into a message and an
exit code. Exit codes: 1 a check failed, 2 bad input or nothing fits,
3 the environment failed (Docker daemon, network, disk).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_ENVIRONMENT = 3


class EnvlockError(Exception):
    """Base class: a message for the user, an optional hint, an exit code."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, hint: str | None = None) -> None:
        # Credentials in URLs are never printed: every message passes the one redaction.
        from envlock.door import redact

        message = redact(message)
        hint = redact(hint) if hint is not None else None
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(EnvlockError):
    """Bad input from the user: a spec, a flag value, a file. Exit 2."""

    exit_code = EXIT_USAGE


class DataError(UsageError):
    """A matrix or lock file is missing or corrupt. Exit 2."""


class NoResolution(UsageError):
    """Nothing satisfies the constraints. Exit 2."""


class SdistDoesNotBuild(NoResolution):
    """A source archive the resolver had to build for its metadata (no wheel, no
    static metadata) failed to build here: ``name``, ``version`` and uv's ``cause``;
    ``backend_ran`` when the build backend ran and returned the error."""

    def __init__(self, name: str, version: str, cause: str, *, backend_ran: bool = False) -> None:
        super().__init__(
            f"{name}=={version} has no wheel for the target, and its source archive does "
            f"not build here, so its dependencies cannot be read: {cause}",
            hint="install what its build needs here, pin a version of it that has a wheel "
            "(--with), or lock with --only-binary to refuse source archives",
        )
        self.name = name
        self.version = version
        self.cause = cause
        # uv said the build backend itself returned the error: its build environment
        # was made, so the package's own build failed (not a build requirement missing)
        self.backend_ran = backend_ran


class StubSdists(NoResolution):
    """Source archives that are stubs: their build backend (NVIDIA's wheel-stub)
    downloads a wheel from another index at build time, so their sha256 pins
    nothing of what gets installed. ``pins``: (name, version) of each."""

    def __init__(self, pins: list[tuple[str, str]]) -> None:
        named = ", ".join(f"{n}=={v}" for n, v in pins)
        super().__init__(
            f"the index's source archives of {named} are stubs (build backend wheel-stub): "
            "building them downloads the wheel from another index, which no locked hash "
            "covers",
            hint="lock them from the index that serves their wheels (NVIDIA's own index, "
            "for NVIDIA's packages): add it and route them to it with --index NAME=URL "
            f"--route '{','.join(n for n, _ in pins)}=NAME', or leave them out",
        )
        self.pins = pins


class PinsNeedPython(NoResolution):
    """The pins exclude the lock's Python: ``needs`` maps each pin, as written, to
    the Requires-Python that excludes it (``{"markdown==3.11.3": ">=3.11"}``)."""

    def __init__(self, message: str, hint: str | None = None, *, needs: dict[str, str]) -> None:
        super().__init__(message, hint=hint)
        self.needs = dict(needs)


class CheckFailed(EnvlockError):
    """A check failed (smoke, verify, doctor, lock --check). Exit 1."""

    exit_code = EXIT_CHECK_FAILED


class EnvironmentFailure(EnvlockError):
    """The environment failed: Docker daemon, network, disk. Exit 3."""

    exit_code = EXIT_ENVIRONMENT
