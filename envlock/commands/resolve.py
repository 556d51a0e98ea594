"""``envlock resolve SPEC``: what goes with a TensorFlow requirement, and why."""

from __future__ import annotations

import sys

from envlock.model import Resolution

TYPE_CHECKING = False  # typing is not imported at run time (start-up: see envlock.record)
if TYPE_CHECKING:
    import argparse
    from types import SimpleNamespace

DESCRIPTION = (
    "Resolve a TensorFlow requirement against envlock's matrices: the newest "
    "release satisfying every constraint, its Python, CUDA, cuDNN, minimum driver and "
    "nvidia/cuda base image, with the reasons. Offline and fast."
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from envlock.resolve import add_resolve_arguments

    parser = subparsers.add_parser(
        "resolve",
        help="which TensorFlow, Python, CUDA, cuDNN, driver and base image go together",
        description=DESCRIPTION,
    )
    add_resolve_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def quick_args(argv: list[str]) -> SimpleNamespace | None:
    """The arguments of a plain ``envlock resolve`` command line, read without
    argparse (start-up time), exactly as ``register``'s parser reads them;
    None for any other line (``envlock.cli.quick_parse``)."""
    from types import SimpleNamespace

    from envlock.cli import quick_parse
    from envlock.resolve import quick_flags

    values = quick_parse(argv, "spec", quick_flags(), {"--json": "json"})
    if values is None:
        return None
    return SimpleNamespace(command="resolve", func=run, **values)


def summary(res: Resolution) -> str:
    """The readable form: one fact per line, then why, then warnings."""
    rows = [
        ("release", f"{res.framework} {res.version}"),
        ("python", f"{res.python}  (wheels for {', '.join(res.python_supported)})"),
        ("cuda", f"{res.cuda}  (cuDNN {res.cudnn})"),
        ("driver", f">= {res.driver_min}"),
        ("cuda source", res.cuda_source),
        (
            "base image",
            res.base_image + (f"@{res.base_image_digest}" if res.base_image_digest else ""),
        ),
        (
            "image cuda",
            res.cuda_image_version + (f"  (cuDNN {res.image_cudnn})" if res.image_cudnn else ""),
        ),
        ("os", res.os + (f"  (python3 {res.os_python})" if res.os_python else "")),
        ("matrix", f"{res.matrix_version}  (sha256 {res.matrix_digest[:12]})"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
    if res.reasons:
        lines.append("")
        lines.append("why:")
        lines.extend(f"  - {r}" for r in res.reasons)
    if res.warnings:
        lines.append("")
        lines.append("warnings:")
        lines.extend(f"  ! {w}" for w in res.warnings)
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from envlock.resolve import constraints_from_args, resolve

    res = resolve(constraints_from_args(args))
    if args.json:
        from envlock.output import emit_json

        emit_json(res.to_dict())
    else:
        sys.stdout.write(summary(res))
    return 0
