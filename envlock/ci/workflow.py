"""``envlock ci init``: the GitHub Actions workflow that builds the committed cells.

Rendered from ``envlock/data/templates/envlock-images.yml.j2`` (Jinja2, ``StrictUndefined``)
from one ``WorkflowContext``. The values that reach the YAML pass the door
first (``envlock.render.values.checked``, with a shape per kind): the SPEC
must be one ``envlock resolve`` reads, the runner label a plain label, the
folders plain relative paths, every ``uses:`` a row of the actions table
(``envlock.ci.actions``); the template quotes each for where it lands (a YAML
double-quoted string, or a string literal inside a GitHub expression) and
shell steps read values from ``env``. Beside the workflow, in the install
folder, go envlock's hash-pinned closure (``envlock.ci.install``), envlock's
wheel when it is committed, and the public key the report job trusts. All
files are made first, then written atomically; existing ones are kept unless
``force``.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envlock import __version__
from envlock.ci.actions import ActionTable, load_actions
from envlock.errors import DataError, UsageError
from envlock.fsutil import atomic_write
from envlock.render.values import Checked, check_context, checked

DEFAULT_OUTPUT = ".github/workflows/envlock-images.yml"
DEFAULT_RUNNER_LABEL = "gpu"
DEFAULT_CELLS = "cells"
DEFAULT_INSTALL_DIR = ".github/envlock"
PUBLIC_KEY = "signing.pub.pem"
TEMPLATE = "envlock-images.yml.j2"
RUNNER_LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
# a folder of the repository, relative to its root, in characters that need no quoting
REPO_PATH_RE = re.compile(r"^(?!/)(?!.*(^|/)\.\.?(/|$))[A-Za-z0-9._/-]+(?<!/)$")
# a SPEC as resolve reads it, in characters that need no quoting in YAML or shell words
SPEC_RE = re.compile(r"^[A-Za-z0-9._\[\]<>=!~,* -]+$")
PIN_RE = re.compile(r"^[A-Za-z0-9_./@+-]+$")
# a build argument written into the workflow's shell as one word: nothing a shell or a
# GitHub expression would read (no quotes, $, `, {, }, \\, spaces)
BUILD_ARG_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9_.,:/@%+=~-]*$")
NETWORK_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Pin:
    uses: Checked  # ACTION@<40 hex>
    tag: Checked  # the release, for the comment


@dataclass(frozen=True)
class WorkflowContext:
    envlock_version: Checked
    spec: Checked
    runner_label: Checked
    cells: Checked  # the `ci lock` folder, relative to the repository root
    requirements: Checked  # INSTALL_DIR/requirements.txt
    public_key: Checked  # INSTALL_DIR/signing.pub.pem
    python: Checked  # the runner's Python (setup-python)
    pins: dict[Checked, Pin]
    regenerate: Checked
    # ` --build-arg N=V ... --network MODE` for `ci build` (self-hosted runners whose
    # daemon needs them: a mirror index, a daemon without a default bridge); "" if none
    build_flags: Checked


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


def repo_path(value: str, flag: str, example: str) -> Checked:
    """A path inside the repository, relative to its root (the workflow's working folder)."""
    return checked(
        value.strip().rstrip("/"),
        flag,
        shape=REPO_PATH_RE,
        what="a relative path inside the repository (letters, digits, '.', '_', '-', '/')",
        hint=f"e.g. {flag} {example}",
        max_len=200,
    )


def workflow_context(
    spec: str,
    runner_label: str = DEFAULT_RUNNER_LABEL,
    output: str = DEFAULT_OUTPUT,
    *,
    cells: str = DEFAULT_CELLS,
    install_dir: str = DEFAULT_INSTALL_DIR,
    actions: ActionTable | None = None,
    extra_words: tuple[str, ...] = (),
    build_args: tuple[str, ...] = (),
    build_network: str | None = None,
) -> WorkflowContext:
    """The checked values of the workflow, or UsageError (exit 2) naming the flag.

    ``extra_words``: the options of the command line that made it (for the
    regenerate line), already checked by their own door."""
    from envlock.ci.install import REQUIREMENTS, RUNNER_PYTHON
    from envlock.resolve.spec import parse_spec

    parse_spec(spec)  # a SPEC resolve would refuse is refused here
    spec_c = checked(
        spec.strip(),
        "--spec",
        shape=SPEC_RE,
        what="a requirement on tensorflow, torch or jax of plain characters",
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
    cells_c = repo_path(cells, "--cells", DEFAULT_CELLS)
    install_c = repo_path(install_dir, "--install-dir", DEFAULT_INSTALL_DIR)
    table = actions if actions is not None else load_actions()
    pins = {
        checked(name, table.source, error=DataError): Pin(
            uses=checked(row.uses, table.source, shape=PIN_RE, what="ACTION@SHA", error=DataError),
            tag=checked(row.tag, table.source, shape=PIN_RE, what="a tag", error=DataError),
        )
        for name, row in table.pins().items()
    }
    flags: list[str] = []
    for value in build_args:
        arg = checked(
            value,
            "--build-arg",
            shape=BUILD_ARG_RE,
            what="NAME=VALUE without quotes, spaces, '$', '{', '}' or '\\'",
            hint="e.g. --build-arg PIP_INDEX_URL=https://mirror.example/simple",
            max_len=500,
        )
        flags += ["--build-arg", str(arg)]
    if build_network is not None:
        network = checked(
            build_network,
            "--build-network",
            shape=NETWORK_RE,
            what="a network mode or name (host, none, a network)",
            hint="e.g. --build-network host",
        )
        flags += ["--network", str(network)]
    words = ["envlock", "ci", "init", "--spec", str(spec_c), "--runner-label", str(label)]
    if str(cells_c) != DEFAULT_CELLS:
        words += ["--cells", str(cells_c)]
    if str(install_c) != DEFAULT_INSTALL_DIR:
        words += ["--install-dir", str(install_c)]
    words += [*extra_words]
    for i in range(0, len(flags), 2):
        name = "--build-network" if flags[i] == "--network" else flags[i]
        words += [name, flags[i + 1]]
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
        cells=cells_c,
        requirements=checked(f"{install_c}/{REQUIREMENTS}", "--install-dir"),
        public_key=checked(f"{install_c}/{PUBLIC_KEY}", "--install-dir"),
        python=checked(RUNNER_PYTHON, "the runner's Python", error=DataError),
        pins=pins,
        regenerate=regenerate,
        # each flag passed its door above; none given is the empty string
        build_flags=Checked("".join(" " + f for f in flags)),
    )


def render_workflow(ctx: WorkflowContext) -> str:
    import jinja2

    check_context(ctx)
    try:
        return str(_environment().get_template(TEMPLATE).render(ctx=ctx))
    except jinja2.UndefinedError as e:  # a template bug, not a user's mistake
        raise DataError(f"templates/{TEMPLATE}: {e.message}", hint="report this envlock bug") from e


MAX_WORKFLOW = 1024 * 1024  # the workflow envlock writes is a few KB


def write_files(files: dict[Path, bytes], *, force: bool = False) -> None:
    """Write every file atomically; existing ones only with ``force`` (checked before any
    is written, so a refusal leaves all of them as they were)."""
    from envlock.readers import read_optional

    for path in files:
        if path.is_dir():
            raise UsageError(f"{path} is a folder", hint="give -o a file path")
        if force:
            continue
        # compared before it is replaced; one that is there but cannot be read (a
        # FIFO, a device, over 1 MiB) is exit 2 naming it, never waited on
        hint = "give --force to replace it, or -o another path"
        current = read_optional(path, "-o", limit=MAX_WORKFLOW, hint=hint)
        if current is not None and current != files[path]:
            raise UsageError(
                f"{path} exists; envlock ci init does not overwrite it",
                hint="give --force to replace it, or -o another path",
            )
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data)
