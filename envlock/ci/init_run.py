"""``envlock ci init`` as one call: ``init_workflow(InitRequest)``: the GitHub
Actions workflow over the committed cells (``envlock.ci.workflow``), and beside it
envlock's hash-pinned install requirements (``envlock.ci.install``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envlock.output import Printed


@dataclass(frozen=True)
class InitRequest:
    """``envlock ci init``'s flags as typed values."""

    spec: str
    envlock_wheel: str
    output: str = ".github/workflows/envlock-images.yml"
    runner_label: str = "gpu"
    cells: str = "cells"
    install_dir: str = ".github/envlock"
    public_key: str | None = None
    actions_from: str | None = None
    build_arg: tuple[str, ...] = ()
    build_network: str | None = None
    index_url: str | None = None
    exclude_newer: str | None = None
    force: bool = False


def init_workflow(args: InitRequest) -> Printed:
    """Write the workflow and envlock's install requirements (``doc``: the files)."""
    from envlock.ci.actions import load_actions
    from envlock.ci.install import REQUIREMENTS, closure_text, envlock_wheel
    from envlock.ci.workflow import (
        render_workflow,
        workflow_context,
        write_files,
    )
    from envlock.render.values import checked

    extra: list[str] = []
    for flag in ("envlock_wheel", "public_key", "actions_from", "index_url", "exclude_newer"):
        value = getattr(args, flag)
        if value is not None:
            name = "--" + flag.replace("_", "-")
            extra += [name, str(checked(value, name, max_len=1000))]
    table = load_actions(Path(args.actions_from)) if args.actions_from else None
    ctx = workflow_context(
        args.spec,
        args.runner_label,
        args.output,
        cells=args.cells,
        install_dir=args.install_dir,
        actions=table,
        extra_words=tuple(extra),
        build_args=tuple(args.build_arg),
        build_network=args.build_network,
    )
    files: dict[Path, bytes] = {}
    if args.public_key:
        from envlock.report.keys import load_public

        load_public(Path(args.public_key))  # a bad key is exit 2 here
        from envlock.readers import read_bytes

        files[Path(ctx.public_key)] = read_bytes(args.public_key, "--public-key")
    wheel = envlock_wheel(args.envlock_wheel)
    exclude_newer = None
    if args.exclude_newer:
        from envlock.instant import exclude_newer as instant

        exclude_newer = instant(args.exclude_newer)
    install_dir = str(ctx.requirements).rsplit("/", 1)[0]
    requirements = closure_text(
        wheel, install_dir, index_url=args.index_url, exclude_newer=exclude_newer
    )
    if wheel.url is None:
        files[Path(install_dir) / wheel.filename] = wheel.data
    files[Path(install_dir) / REQUIREMENTS] = requirements.encode()
    files[Path(args.output)] = render_workflow(ctx).encode()
    write_files(files, force=args.force)
    text = "".join(f"wrote {path}\n" for path in files) + (
        f"cells of {args.spec} from {ctx.cells}/, smoke on runner label {args.runner_label!r}\n"
        "before the first run: add the repository secret ENVLOCK_SIGNING_KEY (a key made "
        "by `envlock keygen`)"
        + ("" if args.public_key else f" and commit its public key as {ctx.public_key}")
        + f", and commit {ctx.cells}/ (`envlock ci lock SPEC -o {ctx.cells}`)\n"
    )
    return Printed([str(path) for path in files], text)
