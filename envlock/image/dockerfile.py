"""A bundle's Dockerfile, read before the engine is asked: the folder's Dockerfile
(a regular file of at most 1 MiB), its ARG declarations and their defaults, the
``--build-arg`` values checked against them, ``$NAME`` substitution, and the image
the last stage starts FROM.

``envlock build`` and ``ci build`` use these checks; nothing here talks to Docker.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envlock.errors import UsageError

_ARG = re.compile(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(\S*))?", re.MULTILINE | re.IGNORECASE)
_FROM = re.compile(r"^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)", re.MULTILINE | re.IGNORECASE)
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_BUILD_ARG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# build arguments whose value names an image: checked as image references
IMAGE_ARGS = ("BASE_IMAGE", "UV_IMAGE")


def check_bundle(directory: Path) -> Path:
    """The Dockerfile of a bundle folder, or UsageError saying what is wrong."""
    if not directory.exists():
        raise UsageError(
            f"{directory}: no such folder",
            hint="pass the folder `envlock lock ... -o DIR` wrote",
        )
    if not directory.is_dir():
        raise UsageError(f"{directory}: not a folder", hint="pass the bundle folder, not a file")
    dockerfile = directory / "Dockerfile"
    if not os.path.lexists(dockerfile):  # one that is there but unreadable: read_dockerfile
        raise UsageError(
            f"{directory}: no Dockerfile in this folder",
            hint="render one with `envlock render DIR` or `envlock lock SPEC -o DIR`",
        )
    return dockerfile


MAX_DOCKERFILE = 1024 * 1024  # envlock's own render is a few KB


def read_dockerfile(dockerfile: Path) -> str:
    """The Dockerfile's text (undecodable bytes replaced, as the engine reads it):
    a regular file of at most 1 MiB, else exit 2 naming it (a FIFO is refused, not
    waited on; a folder or a huge file is not read)."""
    from envlock.readers import read_bytes

    data = read_bytes(
        dockerfile,
        limit=MAX_DOCKERFILE,
        hint="render it again with `envlock render DIR` or `envlock lock SPEC -o DIR`",
    )
    return data.decode("utf-8", errors="replace")


def substitute(text: str, args: Mapping[str, str]) -> str:
    """``text`` with ``$NAME`` / ``${NAME}`` replaced from ``args`` (unknown names stay)."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return args.get(name, m.group(0))

    return _VAR.sub(one, text)


# ---------------------------------------------------------------- build arguments


def declared_args(text: str) -> dict[str, str | None]:
    """The ARG names a Dockerfile declares, each with the first default it is given."""
    found: dict[str, str | None] = {}
    for m in _ARG.finditer(text):
        name, default = m.group(1), m.group(2)
        if found.get(name) is None:
            found[name] = default.strip("\"'") if default is not None else None
    return found


def parse_build_args(values: Sequence[str], what: str = "--build-arg") -> dict[str, str]:
    """``K=V`` strings as a dict; UsageError (exit 2) for a malformed or repeated one."""
    parsed: dict[str, str] = {}
    for value in values:
        name, sep, arg = value.partition("=")
        if not sep or not _BUILD_ARG_NAME.match(name):
            raise UsageError(
                f"{what} {value!r}: expected NAME=VALUE",
                hint=f"e.g. {what} PIP_INDEX_URL=https://mirror.example/simple",
            )
        if name in parsed and parsed[name] != arg:
            raise UsageError(
                f"{what} {name} is given twice, with different values",
                hint=f"give {what} {name}=... once",
            )
        parsed[name] = arg
    return parsed


def check_build_args(
    dockerfile: Path, declared: Mapping[str, Any], args: Mapping[str, str]
) -> None:
    """Refuse build arguments the Dockerfile does not declare, credentials, bad image names."""
    from envlock.door import bad_character, redact
    from envlock.image import ref as imageref

    names = ", ".join(sorted(declared)) or "none"
    for name, value in args.items():
        if name not in declared:
            raise UsageError(
                f"--build-arg {name}: {dockerfile} declares no such build argument "
                f"(it declares: {names})",
                hint="pass one of the declared arguments, or re-render the bundle with envlock",
            )
        bad = bad_character(value)
        if bad:
            raise UsageError(
                f"--build-arg {name}: the value holds the control character {bad}",
                hint="pass the value on one line, without control characters",
            )
        if redact(value) != value:
            raise UsageError(
                f"--build-arg {name}: the value is a URL with credentials (user:password@); "
                "build arguments stay readable in the image history (`docker history`)",
                hint="pass the URL without credentials and give them to pip another way: "
                "a netrc file, or a build secret",
            )
        if name in IMAGE_ARGS:
            imageref.parse(value, f"--build-arg {name}")


def final_base(text: str, args: Mapping[str, str]) -> str | None:
    """The image the last stage starts from (None when it starts from an earlier stage)."""
    froms = _FROM.findall(text)
    if not froms:
        return None
    stages = {
        m.group(1).lower()
        for m in re.finditer(r"^\s*FROM\s+\S+.*?\s+AS\s+(\S+)", text, re.MULTILINE | re.I)
    }
    name = substitute(froms[-1], args)
    if name.lower() in stages or "$" in name or name == "scratch":
        return None
    return name
