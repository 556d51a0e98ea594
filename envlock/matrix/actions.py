"""``envlock matrix refresh|check|show`` as one call each: ``refresh_matrix``,
``check_matrices``, ``show_matrix``. Each returns an ``envlock.output.Printed``:
the --json document, the text, what goes to stderr after it, the exit status."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envlock import output
from envlock.errors import EXIT_CHECK_FAILED, DataError, UsageError
from envlock.output import Printed


@dataclass(frozen=True)
class RefreshRequest:
    """``envlock matrix refresh``'s flags (``json``: no progress bar)."""

    index_url: str | None = None
    project: str = "tensorflow"
    output: Path | None = None
    jobs: int | None = None
    notes_only: bool = False
    check: bool = False
    json: bool = False


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


def refresh_matrix(args: RefreshRequest) -> Printed:
    from envlock import fsutil
    from envlock.index.config import index_url
    from envlock.matrix import check, load_tensorflow, tested
    from envlock.matrix import refresh as refresh_mod
    from envlock.matrix.tensorflow import dumps

    jobs = args.jobs if args.jobs is not None else refresh_mod.DEFAULT_JOBS
    if jobs < 1 or jobs > 64:
        raise UsageError(f"--jobs {jobs} is out of range", hint="use a number from 1 to 64")
    if args.project != "tensorflow":
        return _refresh_builds(args, args.output or _default_output(args.project), jobs)
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

    return _summary(summary)


def _summary(summary: dict[str, Any]) -> Printed:
    rows = [[k.replace("_", " "), str(v)] for k, v in summary.items()]
    return Printed(summary, output.table(["refresh", "value"], rows))


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
    args: RefreshRequest, matrix_path: Path, table: Any, notes: Any, jobs: int
) -> Printed:
    """``refresh --check``: the matrix at ``matrix_path`` against a fresh refresh."""
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
    summary = dict(refresh_mod.summary(result, str(matrix_path)))
    summary.pop("output")
    doc = {"matrix": str(matrix_path), **found.to_dict(), **summary}
    if found.current:
        return Printed(
            doc,
            f"current: {matrix_path} has every one of the {result.releases} tensorflow "
            f"releases and release candidates on the index, row for row\n",
        )
    return Printed(
        doc,
        "".join(line + "\n" for line in found.lines()),
        EXIT_CHECK_FAILED,
        text_stderr=f"envlock: check failed: {len(found.new)} new, {len(found.changed)} "
        f"differing, {len(found.gone)} gone: {matrix_path} is not what the index says today\n"
        f"  hint: run 'envlock matrix refresh -o {shlex.quote(str(matrix_path))}', review the "
        "diff and commit it\n",
    )


def check_matrices(matrix: Path | None) -> Printed:
    """``matrix check``: every matrix file validated, tensorflow.toml against the
    tested-configurations table (``check_all``; its report's ``to_dict`` is --json)."""
    from envlock.matrix.check import check_all

    report = check_all(matrix)
    lines = ["validated: " + ", ".join(report.files) + "\n"]
    w = lines.append
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
        return Printed(report.to_dict(), "".join(lines))
    return Printed(
        report.to_dict(),
        "".join(lines),
        EXIT_CHECK_FAILED,
        text_stderr=f"envlock: check failed: {bad} unexplained disagreement(s), "
        f"{len(report.note_problems)} note problem(s)\n"
        "  hint: explain each one in envlock/data/matrices/tf-notes.toml, then run "
        "'envlock matrix refresh --notes-only'\n",
    )


def show_matrix(path: Path | None) -> Printed:
    from envlock.matrix import load_tensorflow
    from envlock.matrix.tested import format_python_range

    matrix = load_tensorflow(path)
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
    text = output.table(headers, rows) + (
        f"{len(matrix.releases)} releases, data version {matrix.data_version}\n"
        "  and-cuda python: the Pythons --cuda-source pip can install ([and-cuda] wheels)\n"
        "  (cuda): CPU-only wheel; the tested-configurations table's CUDA for the series\n"
        "  uploaded: the first wheel's upload date (UTC); remark: yanked, pre-release, or a note "
        "in --json\n"
    )
    return Printed([r.to_dict() for r in matrix.releases], text)


def _refresh_builds(args: RefreshRequest, out_path: Path, jobs: int) -> Printed:
    """``matrix refresh --project torch|jax``: write or check torch.toml / jax.toml."""
    from envlock import fsutil
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
        doc = {k: v for k, v in summary.items() if k != "output"}
        doc = {"matrix": str(out_path), "current": not lines, "drift": lines, **doc}
        if not lines:
            return Printed(
                doc,
                f"current: {out_path} has every {project} release and CUDA build on the index "
                f"({summary['from_index']}) and from the published tables "
                f"({summary['from_published_tables']}), row for row\n",
            )
        return Printed(
            doc,
            "".join(line + "\n" for line in lines),
            EXIT_CHECK_FAILED,
            text_stderr=f"envlock: check failed: {len(lines)} rows differ: {out_path} is not "
            f"what the index says today\n  hint: run 'envlock matrix refresh --project "
            f"{project} -o {shlex.quote(str(out_path))}', review the diff and commit it\n",
        )
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
    return _summary(summary)
