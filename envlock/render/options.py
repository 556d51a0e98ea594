"""What a bundle is rendered with, and the two files that keep it between renders.

``RenderOptions`` holds the choices of ``envlock lock`` / ``envlock render``
as plain values. A bundle keeps them in two files of its own: render.json (how
it was rendered, so ``envlock render DIR`` and ``envlock lock --check DIR``
render it the same way again) and runtime.json (runtime settings the user may
edit, kept across re-renders).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from envlock.errors import UsageError
from envlock.readers import read_json

if TYPE_CHECKING:
    from envlock.render.envlock_runtime import Settings

PYTHON_SOURCES = ("image", "apt", "uv")
# render.json: the options a bundle was rendered with, so `envlock render DIR`
# and `envlock lock --check DIR` render it the same way again.
RENDER_JSON = "render.json"
RENDER_SCHEMA = "envlock.render/v1"
RECORDED_OPTIONS = ("base_image", "base_digest", "os", "ca_cert", "python_from")


class RenderRecord(TypedDict):
    """render.json: the options a bundle was rendered with, None where not given."""

    schema: str
    base_image: str | None
    base_digest: str | None
    os: str | None
    ca_cert: str | None
    python_from: str | None


@dataclass(frozen=True)
class RenderOptions:
    """How to render; None is "not given". All but ``runtime`` are recorded in render.json."""

    base_image: str | None = None  # FROM this instead of the resolved nvidia/cuda tag
    base_digest: str | None = None  # "sha256:..." pin for the base image
    os: str | None = None  # "ubuntu24.04": the same CUDA image on another Ubuntu
    ca_cert: str | None = None  # PEM file trusted by the build stage
    python_from: str | None = None  # image | apt | uv; None: chosen from the OS
    runtime: Settings | None = None  # runtime.json settings to keep (validated)

    def recorded(self) -> RenderRecord:
        """The render.json document: the options as given, None where not given."""
        return RenderRecord(
            schema=RENDER_SCHEMA,
            base_image=self.base_image,
            base_digest=self.base_digest,
            os=self.os,
            ca_cert=self.ca_cert,
            python_from=self.python_from,
        )

    def over(self, recorded: Mapping[str, str | None]) -> RenderOptions:
        """These options, with the recorded ones standing in for those not given."""

        def kept(name: str, given: str | None) -> str | None:
            return given if given is not None else recorded.get(name)

        return replace(
            self,
            base_image=kept("base_image", self.base_image),
            base_digest=kept("base_digest", self.base_digest),
            os=kept("os", self.os),
            ca_cert=kept("ca_cert", self.ca_cert),
            python_from=kept("python_from", self.python_from),
        )


def regenerate_command(options: RenderOptions) -> str:
    """The command line that renders the bundle again (written into its comments)."""
    parts = ["envlock", "render", "."]
    if options.base_image:
        parts += ["--base-image", options.base_image]
    if options.base_digest:
        parts += ["--base-digest", options.base_digest]
    if options.os:
        parts += ["--os", options.os]
    if options.ca_cert:
        parts += ["--ca-cert", options.ca_cert]
    if options.python_from:
        parts += ["--python-from", options.python_from]
    return shlex.join(parts)


def read_render_options(directory: Path) -> dict[str, str | None] | None:
    """The options an existing bundle was rendered with (its render.json), or
    None when it has none (bundles made before envlock recorded them)."""
    path = directory / RENDER_JSON
    hint = "fix it, or delete it and give the render options on the command line"
    if not os.path.lexists(path):
        return None
    doc = read_json(path, hint=hint)  # strict: one UsageError naming the file and the defect
    if not isinstance(doc, dict) or doc.get("schema") != RENDER_SCHEMA:
        raise UsageError(f"{path}: not an {RENDER_SCHEMA} document", hint=hint)
    options: dict[str, str | None] = {}
    for name, value in doc.items():
        if name == "schema":
            continue
        if name not in RECORDED_OPTIONS:
            raise UsageError(f"{path}: unknown option {name!r}", hint=hint)
        if value is not None and not isinstance(value, str):
            raise UsageError(f"{path}: {name} must be a string or null, not {value!r}", hint=hint)
        options[name] = value
    return options


def runtime_settings(existing: object) -> Settings:
    """The runtime.json document: the defaults (``existing`` None), or ``existing`` checked."""
    from envlock.render import envlock_runtime

    if existing is None:
        return envlock_runtime.DEFAULTS.copy()
    try:
        return envlock_runtime.validate(
            dict(existing) if isinstance(existing, Mapping) else existing
        )
    except envlock_runtime.ConfigError as e:
        raise UsageError(str(e), hint="fix runtime.json or delete it to get the defaults") from None


def read_runtime(directory: Path) -> Settings | None:
    """An existing bundle's runtime.json (so re-rendering keeps the user's edits)."""
    path = directory / "runtime.json"
    if not os.path.lexists(path):
        return None
    data = read_json(path, hint="fix it or delete it to get the default runtime settings")
    return runtime_settings(data)
