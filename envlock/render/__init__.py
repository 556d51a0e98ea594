"""Render the bundle (Dockerfile, bootstrap.sh, README.md, ...) from a Lock.

The package, by idea: ``values`` checks every value that may reach a
template; ``options`` holds the ``RenderOptions`` and the bundle's
render.json and runtime.json; ``context`` computes the one typed
``BundleContext`` from the Lock and the options. Here: the Jinja2
environment (``StrictUndefined``, the quoting filters) and ``render_bundle``.
The text of every file lives in ``envlock/data/templates/``, which hold only
loops and conditionals over that context. ``render_bundle`` is pure: no network, no
Docker; it reads only the packaged templates, the smoke harness and, when
asked for, the ``--ca-cert`` file.
"""

from __future__ import annotations

import functools
import json
import shlex
from collections.abc import Mapping
from typing import Any, TypedDict

from envlock.errors import DataError
from envlock.model import Lock
from envlock.render.context import CA_CERT_NAME, BundleContext, bundle_context
from envlock.render.options import (
    PYTHON_SOURCES,
    RENDER_JSON,
    RenderOptions,
    read_render_options,
    read_runtime,
    runtime_settings,
)
from envlock.render.values import check_context, read_ca_cert

EXECUTABLE: frozenset[str] = frozenset({"bootstrap.sh"})


def _harness() -> bytes:
    from importlib import resources

    source = resources.files("envlock") / "smoke" / "harness.py"
    if not source.is_file():
        raise DataError(
            "the smoke harness envlock/smoke/harness.py is missing from this envlock",
            hint="reinstall envlock",
        )
    return source.read_bytes()


def _runtime_module() -> bytes:
    from importlib import resources

    return (resources.files("envlock") / "render" / "envlock_runtime.py").read_bytes()


def _in_dquotes(value: object) -> str:
    """``value`` for the inside of a double-quoted shell or Dockerfile word:
    backslash, quote, $ and ` escaped (the door let no newline through)."""
    text = str(value)
    for ch in ("\\", '"', "$", "`"):
        text = text.replace(ch, "\\" + ch)
    return text


def _dquote(value: object) -> str:
    """A double-quoted Dockerfile/shell word."""
    return f'"{_in_dquotes(value)}"'


def _json_string(value: object) -> str:
    """A JSON string, for the exec (JSON-array) forms of RUN, CMD and ENTRYPOINT."""
    return json.dumps(str(value))


@functools.lru_cache(maxsize=1)
def _environment() -> Any:
    """One Jinja2 environment per process; templates are compiled once."""
    from envlock.resources import template_environment

    env = template_environment(autoescape=False, keep_trailing_newline=True)
    # Quoting for the language of each file: shquote for a shell word (bootstrap.sh,
    # shell-form RUN), indquotes inside a double-quoted word, dquote for a
    # double-quoted Dockerfile value (LABEL), json for a JSON-array element.
    env.filters["dquote"] = _dquote
    env.filters["indquotes"] = _in_dquotes
    env.filters["shquote"] = lambda v: shlex.quote(str(v))
    env.filters["json"] = _json_string
    return env


def render_template(name: str, ctx: BundleContext, **extra: Any) -> str:
    """Render one template of ``templates/`` with the bundle context."""
    import jinja2

    check_context(ctx)  # the door: only values that passed a validator
    check_context(extra)
    env = _environment()
    try:
        return str(env.get_template(name).render(ctx=ctx, **extra))
    except jinja2.UndefinedError as e:  # a template bug, not a user's mistake
        raise DataError(f"templates/{name}: {e.message}", hint="report this envlock bug") from e


class ExpectDocument(TypedDict, total=False):
    """expect.json: what the lock promises the smoke harness will find (the harness
    reads it as its ``Expect``; tests/test_smoke_parity.py holds the keys together).
    ``frameworks`` only when the lock holds more than its own framework (torch, jax
    beside tensorflow): the harness then tests each."""

    framework: str
    frameworks: list[str]
    driver_min: str  # the whole lock's floor, in a lock that records it
    driver_set_by: str
    version: str
    python: str
    cuda: str
    cudnn: str
    compute_capabilities: list[str]
    lock_digest: str
    build: str  # torch/JAX: the CUDA build, "cu130", "cuda13"
    # the lock's other frameworks, each with what the harness judges it against:
    # {"torch": {"version": "2.15.0", "cuda": "13.2"}}
    others: dict[str, dict[str, str]]


def framework_build(framework: str, cuda: str) -> str:
    """The CUDA build a torch or JAX lock names: torch's local label (CUDA 12.8 ->
    ``cu128``), JAX's plugin extra (``cuda13``); "" for TensorFlow."""
    digits = cuda.split(".")
    if framework == "torch" and len(digits) >= 2:
        return f"cu{digits[0]}{digits[1]}"
    if framework == "jax" and digits[0]:
        return f"cuda{digits[0]}"
    return ""


def expect_document(ctx: BundleContext) -> ExpectDocument:
    cuda, cudnn = str(ctx.cuda), str(ctx.cudnn)
    if ctx.framework == "jax":
        # JAX states its CUDA and cuDNN as floors of the plugin's extra (jax.toml:
        # with-cuda-minimum), not as what it was built with: the majors are the facts
        cuda, cudnn = cuda.split(".")[0], cudnn.split(".")[0]
    doc: ExpectDocument = {
        "framework": ctx.framework,
        "version": ctx.version,
        "python": ctx.python,
        "cuda": cuda,
        "cudnn": cudnn,
        "compute_capabilities": list(ctx.compute_capabilities),
        "lock_digest": ctx.lock_digest,
    }
    build = framework_build(ctx.framework, str(ctx.cuda))
    if build:
        doc["build"] = build
    if len(ctx.frameworks) > 1:
        doc["frameworks"] = list(ctx.frameworks)
    if ctx.others:
        doc["others"] = {
            str(name): {"version": str(v), **({"cuda": str(c)} if str(c) else {})}
            for name, v, c in ctx.others
        }
    if ctx.driver_set_by:  # a lock made before #40 renders as it did
        doc["driver_min"] = ctx.driver_min
        doc["driver_set_by"] = ctx.driver_set_by
    return doc


def render_bundle(
    lock: Lock, options: RenderOptions, lock_files: Mapping[str, bytes]
) -> dict[str, str | bytes]:
    """Return {relative path: content} for every rendered bundle file."""
    ctx = bundle_context(lock, options, lock_files)
    files: dict[str, str | bytes] = {
        "Dockerfile": render_template("Dockerfile.j2", ctx),
        ".dockerignore": render_template("dockerignore.j2", ctx),
        "bootstrap.sh": render_template("bootstrap.sh.j2", ctx),
        "README.md": render_template("README.md.j2", ctx),
        "expect.json": json.dumps(expect_document(ctx), indent=2) + "\n",
        "runtime.json": json.dumps(runtime_settings(options.runtime), indent=2) + "\n",
        RENDER_JSON: json.dumps(options.recorded(), indent=2, sort_keys=True) + "\n",
        "envlock_runtime.py": _runtime_module(),
        "envlock_smoke.py": _harness(),
    }
    if options.ca_cert:
        files[CA_CERT_NAME] = read_ca_cert(options.ca_cert)
    return files


def warnings_of(lock: Lock, options: RenderOptions, lock_files: Mapping[str, bytes]) -> list[str]:
    """What render would warn about (printed by the commands)."""
    return list(bundle_context(lock, options, lock_files).warnings)


__all__ = [
    "EXECUTABLE",
    "PYTHON_SOURCES",
    "BundleContext",
    "RENDER_JSON",
    "RenderOptions",
    "bundle_context",
    "read_render_options",
    "read_runtime",
    "render_bundle",
    "render_template",
    "runtime_settings",
    "warnings_of",
]
