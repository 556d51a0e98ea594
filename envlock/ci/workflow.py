"""``envlock ci init``: the GitHub Actions workflow that builds every cell.

Rendered from ``templates/envlock-images.yml.j2`` (Jinja2, ``StrictUndefined``)
from one ``WorkflowContext``. The values that reach the YAML pass the door
first (``envlock.render.values.checked``, with a shape per kind): the SPEC
must be one ``envlock resolve`` reads, the runner label a plain label, the
install requirement a plain requirement; the template quotes each for where
it lands (a YAML double-quoted string, or a string literal inside a GitHub
expression). The file is written atomically and an existing one is kept
unless ``force``.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envlock import __version__
from envlock.errors import DataError, UsageError
from envlock.fsutil import atomic_write
from envlock.render.values import Checked, check_context, checked

DEFAULT_OUTPUT = ".github/workflows/envlock-images.yml"
DEFAULT_RUNNER_LABEL = "gpu"
TEMPLATE = "envlock-images.yml.j2"
RUNNER_LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
# what pip installs in the workflow: a name with optional extras and version specifiers
INSTALL_RE = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?([<>=!~]=?[0-9A-Za-z.*+!-]+,?)*$"
)
# a SPEC as resolve reads it, in characters that need no quoting in YAML or shell words
SPEC_RE = re.compile(r"^[A-Za-z0-9._\[\]<>=!~,* -]+$")


@dataclass(frozen=True)
class WorkflowContext:
    envlock_version: Checked
    spec: Checked
    runner_label: Checked
    install: Checked
    regenerate: Checked


def _yaml(value: object) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is a subset of it)."""
    return json.dumps(str(value), ensure_ascii=True)


def _ghexpr(value: object) -> str:
    """A string literal inside a GitHub expression: single quotes, ' doubled."""
    return "'" + str(value).replace("'", "''") + "'"


def _environment() -> Any:
    from envlock.resources import template_environment

    env = template_environment(
        autoescape=False,
        keep_trailing_newline=True,
        variable_start_string="[[",
        variable_end_string="]]",
    )
    env.filters["yaml"] = _yaml
    env.filters["ghexpr"] = _ghexpr
    return env


def workflow_context(
    spec: str,
    runner_label: str = DEFAULT_RUNNER_LABEL,
    install: str | None = None,
    output: str = DEFAULT_OUTPUT,
) -> WorkflowContext:
    """The checked values of the workflow, or UsageError (exit 2) naming the flag."""
    from envlock.resolve.spec import parse_spec

    parse_spec(spec)  # a SPEC resolve would refuse is refused here
    spec_c = checked(
        spec.strip(),
        "--spec",
        shape=SPEC_RE,
        what="a requirement on tensorflow of plain characters",
        hint="e.g. --spec 'tensorflow>=2.14,<2.17'",
        max_len=200,
    )
    label = checked(
        runner_label.strip(),
        "--runner-label",
        shape=RUNNER_LABEL_RE,
        what="a runner label (letters, digits, '.', '_', '-')",
        hint="e.g. --runner-label gpu",
        max_len=100,
    )
    install_text = install if install is not None else f"envlock=={__version__}"
    install_c = checked(
        install_text,
        "--install",
        shape=INSTALL_RE,
        what="a requirement pip installs (name, extras, version specifiers)",
        hint=f"e.g. --install envlock=={__version__}",
        max_len=200,
    )
    words = ["envlock", "ci", "init", "--spec", str(spec_c), "--runner-label", str(label)]
    if install is not None:
        words += ["--install", str(install_c)]
    words += ["-o", output, "--force"]
    regenerate = checked(
        shlex.join(words),
        "-o",
        what="a command line",
        hint="give an output path without control characters",
    )
    return WorkflowContext(
        envlock_version=checked(__version__, "envlock's version", error=DataError),
        spec=spec_c,
        runner_label=label,
        install=install_c,
        regenerate=regenerate,
    )


def render_workflow(ctx: WorkflowContext) -> str:
    import jinja2

    check_context(ctx)
    try:
        return str(_environment().get_template(TEMPLATE).render(ctx=ctx))
    except jinja2.UndefinedError as e:  # a template bug, not a user's mistake
        raise DataError(f"templates/{TEMPLATE}: {e.message}", hint="report this envlock bug") from e


def write_workflow(path: Path, text: str, *, force: bool = False) -> None:
    """Write the workflow atomically; an existing file only with ``force``."""
    if path.exists() and not force:
        raise UsageError(
            f"{path} exists; envlock ci init does not overwrite it",
            hint="give --force to replace it, or -o another path",
        )
    if path.is_dir():
        raise UsageError(f"{path} is a folder", hint="give -o a file path")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text)
