"""``envlock matrix refresh|check|show``: the TensorFlow matrix and its checks."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from envlock.errors import EXIT_CHECK_FAILED, EXIT_OK, UsageError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "matrix",
        help="show, check or refresh the version matrices",
        description="The version matrices that envlock resolves against.",
    )
    sub = parser.add_subparsers(dest="matrix_command", metavar="ACTION")
    sub.required = True

    p = sub.add_parser(
        "refresh",
        help="regenerate tensorflow.toml from the package index",
        description="Read every TensorFlow 2.x release's facts from its Linux x86_64 "
        "wheel on the package index (by HTTP range requests) and write tensorflow.toml.",
    )
    p.add_argument("--index-url", help="simple API of the package index (default: pip's)")
    p.add_argument(
        "--project",
        choices=("tensorflow", "torch", "jax"),
        default="tensorflow",
        help="which matrix: tensorflow.toml (default), or torch.toml / jax.toml (one row per "
        "release and CUDA build, read from the torch and jax-cudaNN-plugin wheels)",
    )
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        help="file to write (default: the tensorflow.toml envlock ships)",
    )
    p.add_argument("--jobs", type=int, default=None, help="releases read at once (default: 16)")
    p.add_argument(
        "--notes-only",
        action="store_true",
        help="offline: only re-apply matrices/tf-notes.toml to the existing file",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing: compare the index with the matrix (-o FILE, default the shipped "
        "one) and exit 1 naming each release or release candidate it lacks and each row "
        "that differs",
    )
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.set_defaults(func=run_refresh)

    c = sub.add_parser(
        "check",
        help="validate the matrices and cross-check them with the tested configurations",
        description="Validate every matrix file and compare tensorflow.toml with "
        "TensorFlow's tested-configurations table. A disagreement without a recorded "
        "note fails (exit 1).",
    )
    c.add_argument("--matrix", type=Path, help="check this tensorflow.toml instead")
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    c.set_defaults(func=run_check)

    s = sub.add_parser(
        "show",
        help="print the TensorFlow releases",
        description="Print the rows of tensorflow.toml.",
    )
    s.add_argument("--matrix", type=Path, help="show this tensorflow.toml instead")
    s.add_argument("--json", action="store_true", help="print a JSON list of rows")
    s.set_defaults(func=run_show)


def _default_output(project: str = "tensorflow") -> Path:
    from envlock import resources

    folder = resources.data_dir("matrices")
    if not isinstance(folder, Path):  # pragma: no cover - zipped install
        raise UsageError(
            "envlock's own matrices folder is not a writable directory",
            hint="pass -o FILE",
        )
    return folder / f"{project}.toml"


class _Progress:
    """A rich progress bar on stderr when it is a terminal; nothing otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self._bar = Progress(
                "reading wheels",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._bar.__enter__()
        return self

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            return
        if self._task is None:
            self._task = self._bar.add_task("refresh", total=total)
        self._bar.update(self._task, completed=done)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


def run_refresh(args: argparse.Namespace) -> int:
    from envlock import fsutil, output
    from envlock.index.config import index_url
    from envlock.matrix import check, load_tensorflow, tested
    from envlock.matrix import refresh as refresh_mod
    from envlock.matrix.tensorflow import dumps

    jobs = args.jobs if args.jobs is not None else refresh_mod.DEFAULT_JOBS
    if jobs < 1 or jobs > 64:
        raise UsageError(f"--jobs {jobs} is out of range", hint="use a number from 1 to 64")
    if args.project != "tensorflow":
        from envlock.commands.matrix_builds import run_refresh_builds

        return run_refresh_builds(args, args.output or _default_output(args.project), jobs)
    out_path: Path = args.output or _default_output()
    if args.check and args.notes_only:
        raise UsageError(
            "--check and --notes-only do not go together",
            hint="--check reads the index; --notes-only works offline on the file",
        )
    table = tested.load()
    notes = check.load_notes()

    if args.check:
        return _check_refresh(args, out_path, table, notes, jobs)
    if args.notes_only:
        current = load_tensorflow(out_path)
        updated = check.apply_notes(current, table, notes)
        text = dumps(updated)
        _read_back(text, out_path)
        fsutil.atomic_write(out_path, text)
        summary: dict[str, Any] = {
            "output": str(out_path),
            "releases": len(updated.releases),
            "data_version": updated.data_version,
            "notes": sum(1 for r in updated.releases if r.note),
        }
    else:
        index = index_url(args.index_url)
        show_progress = not args.json and output.stderr_is_tty()
        with _Progress(show_progress) as progress:
            result = refresh_mod.refresh(
                index, tested=table, notes=notes, jobs=jobs, progress=progress
            )
        text = dumps(result.matrix)
        _read_back(text, out_path)
        fsutil.atomic_write(out_path, text)
        summary = dict(refresh_mod.summary(result, str(out_path)))

    if args.json:
        output.emit_json(summary)
    else:
        rows = [[k.replace("_", " "), str(v)] for k, v in summary.items()]
        sys.stdout.write(output.table(["refresh", "value"], rows))
    return EXIT_OK


def _read_back(text: str, out_path: Path) -> None:
    """The refreshed matrix, read by the reader every later command uses
    (``decode_toml`` and ``tensorflow.parse``, what ``load_tensorflow`` and ``matrix
    check`` do) before it replaces ``out_path``: values from a wheel that the
    refresh took but the matrix schema refuses (a build_info.py with
    ``cuda_version = '12.2.3.4.5'``) are a DataError (exit 2) and the file stays as
    it was, instead of a matrix that breaks every later resolve (issue #38)."""
    from envlock.errors import DataError
    from envlock.matrix import decode_toml, tensorflow

    try:
        tensorflow.parse(decode_toml(text.encode("utf-8"), str(out_path)), str(out_path))
    except DataError as e:
        raise DataError(
            f"the refreshed matrix does not pass envlock's own check, so {out_path} was "
            f"not written: {e.message}",
            hint="a wheel on the index carries values the matrix schema refuses; "
            "the matrix you have stays in use: report the wheel to the index's owners",
        ) from None


def _check_refresh(
    args: argparse.Namespace, matrix_path: Path, table: Any, notes: Any, jobs: int
) -> int:
    """``refresh --check``: the matrix at ``matrix_path`` against a fresh refresh."""
    from envlock import output
    from envlock.index.config import index_url
    from envlock.matrix import load_tensorflow
    from envlock.matrix import refresh as refresh_mod

    shipped = load_tensorflow(args.output)  # None: the shipped file, read as resolve does
    index = index_url(args.index_url)
    show_progress = not args.json and output.stderr_is_tty()
    with _Progress(show_progress) as progress:
        result = refresh_mod.refresh(index, tested=table, notes=notes, jobs=jobs, progress=progress)
    from envlock.matrix.drift import drift

    found = drift(shipped, result.matrix)
    if args.json:
        summary = dict(refresh_mod.summary(result, str(matrix_path)))
        summary.pop("output")
        output.emit_json({"matrix": str(matrix_path), **found.to_dict(), **summary})
        return EXIT_OK if found.current else EXIT_CHECK_FAILED
    if found.current:
        sys.stdout.write(
            f"current: {matrix_path} has every one of the {result.releases} tensorflow "
            f"releases and release candidates on the index, row for row\n"
        )
        return EXIT_OK
    for line in found.lines():
        sys.stdout.write(line + "\n")
    sys.stderr.write(
        f"envlock: check failed: {len(found.new)} new, {len(found.changed)} differing, "
        f"{len(found.gone)} gone: {matrix_path} is not what the index says today\n"
        f"  hint: run 'envlock matrix refresh -o {shlex.quote(str(matrix_path))}', review the "
        "diff and commit it\n"
    )
    return EXIT_CHECK_FAILED


def run_check(args: argparse.Namespace) -> int:
    from envlock import output
    from envlock.matrix.check import check_all

    report = check_all(args.matrix)
    if args.json:
        output.emit_json(report.to_dict())
        return EXIT_OK if report.ok else EXIT_CHECK_FAILED
    w = sys.stdout.write
    w("validated: " + ", ".join(report.files) + "\n")
    if report.findings:
        rows = [
            [
                str(f.disagreement.version),
                f.disagreement.field,
                f.disagreement.matrix,
                f.disagreement.table,
                "yes" if f.explained else "NO",
            ]
            for f in report.findings
        ]
        w("\ndisagreements with the tested-configurations table:\n")
        w(output.table(["release", "field", "wheels", "tested-configs", "explained"], rows))
        unexplained = [f for f in report.findings if not f.explained]
        for f in unexplained:
            w(f"unexplained: {f.disagreement.describe()}\n")
    for problem in report.note_problems:
        w(f"note problem: {problem}\n")
    n = len(report.findings)
    bad = sum(1 for f in report.findings if not f.explained)
    if report.ok:
        w(f"\nok: {n} disagreement(s), all explained by matrices/tf-notes.toml\n")
        return EXIT_OK
    sys.stderr.write(
        f"envlock: check failed: {bad} unexplained disagreement(s), "
        f"{len(report.note_problems)} note problem(s)\n"
        "  hint: explain each one in envlock/data/matrices/tf-notes.toml, then run "
        "'envlock matrix refresh --notes-only'\n"
    )
    return EXIT_CHECK_FAILED


def run_show(args: argparse.Namespace) -> int:
    from envlock import output
    from envlock.matrix import load_tensorflow
    from envlock.matrix.tested import format_python_range

    matrix = load_tensorflow(args.matrix)
    if args.json:
        output.emit_json([r.to_dict() for r in matrix.releases])
        return EXIT_OK
    rows = []
    for r in matrix.releases:
        newest_cc = r.compute_capabilities[-1] if r.compute_capabilities else "-"
        rows.append(
            [
                str(r.version),
                format_python_range(r.python),
                format_python_range(r.and_cuda_python) or "-",
                r.cuda if r.cuda_build else f"({r.cuda})",
                r.cudnn,
                newest_cc,
                r.uploaded[:10] or "-",
                r.cuda_from,
                "yanked"
                if r.yanked
                else ("pre-release" if r.prerelease else ("see note" if r.note else "-")),
            ]
        )
    headers = ["tensorflow", "python", "and-cuda python", "cuda", "cudnn", "newest cc"]
    headers += ["uploaded", "cuda from", "remark"]
    sys.stdout.write(output.table(headers, rows))
    sys.stdout.write(
        f"{len(matrix.releases)} releases, data version {matrix.data_version}\n"
        "  and-cuda python: the Pythons --cuda-source pip can install ([and-cuda] wheels)\n"
        "  (cuda): CPU-only wheel; the tested-configurations table's CUDA for the series\n"
        "  uploaded: the first wheel's upload date (UTC); remark: yanked, pre-release, or a note "
        "in --json\n"
    )
    return EXIT_OK
