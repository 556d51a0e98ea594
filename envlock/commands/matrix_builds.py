"""``envlock matrix refresh --project torch|jax``: write or check torch.toml / jax.toml."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from envlock.errors import EXIT_CHECK_FAILED, EXIT_OK, DataError, UsageError


def run_refresh_builds(args: argparse.Namespace, out_path: Path, jobs: int) -> int:
    from envlock import fsutil, output
    from envlock.index.config import index_url
    from envlock.matrix import buildrefresh, builds

    project = args.project
    if args.notes_only:
        raise UsageError(
            f"--notes-only is for tensorflow.toml; {project}.toml has no notes file",
            hint=f"run 'envlock matrix refresh --project {project}'",
        )
    result = buildrefresh.refresh(index_url(args.index_url), project, jobs=jobs)
    summary: dict[str, Any] = {
        "output": str(out_path),
        "builds": len(result.matrix.builds),
        "from_index": sum(1 for b in result.matrix.builds if b.index == "default"),
        "from_published_tables": sum(1 for b in result.matrix.builds if b.index != "default"),
        "data_version": result.matrix.data_version,
        "wheels_read": result.read,
        "requests": result.requests,
        "bytes_read": result.bytes_read,
        "seconds": round(result.seconds, 2),
    }
    if args.check:
        shipped = builds.load_file(project, args.output)
        lines = buildrefresh.drift(shipped, result.matrix)
        if args.json:
            summary.pop("output")
            output.emit_json(
                {"matrix": str(out_path), "current": not lines, "drift": lines, **summary}
            )
            return EXIT_CHECK_FAILED if lines else EXIT_OK
        if not lines:
            sys.stdout.write(
                f"current: {out_path} has every {project} release and CUDA build on the index "
                f"({summary['from_index']}) and from the published tables "
                f"({summary['from_published_tables']}), row for row\n"
            )
            return EXIT_OK
        for line in lines:
            sys.stdout.write(line + "\n")
        sys.stderr.write(
            f"envlock: check failed: {len(lines)} rows differ: {out_path} is not what the "
            f"index says today\n  hint: run 'envlock matrix refresh --project {project} -o "
            f"{shlex.quote(str(out_path))}', review the diff and commit it\n"
        )
        return EXIT_CHECK_FAILED
    text = builds.dumps(result.matrix)
    try:  # what is written is what every later command reads
        from envlock.matrix import decode_toml

        builds.parse(decode_toml(text.encode(), str(out_path)), str(out_path))
    except DataError as e:
        raise DataError(
            f"the refreshed matrix does not pass envlock's own check, so {out_path} was "
            f"left as it was: {e.message}",
            hint="report the wheel named above",
        ) from None
    fsutil.atomic_write(out_path, text)
    if args.json:
        output.emit_json(summary)
    else:
        rows = [[k.replace("_", " "), str(v)] for k, v in summary.items()]
        sys.stdout.write(output.table(["refresh", "value"], rows))
    return EXIT_OK
