"""Cross-check tensorflow.toml against TensorFlow's tested-configurations table.

A *disagreement* is a fact where the wheel and the table differ for a release:
``python`` (the minors with wheels vs the table's range), ``cuda`` and
``cudnn`` (major.minor), ``cuda_build`` (the wheel is not a CUDA build although
the table lists CUDA for its series) or ``table`` (the table has no row for
the series). Disagreements are expected (the table lists one row per series,
patch releases add or drop Python versions, ...); each one must be explained.

Explanations live in ``matrices/tf-notes.toml``, written and reviewed by
people: each entry names releases (version specifiers, any of which may
match), the field, optionally
the exact values it explains, and the text. ``envlock matrix refresh`` copies
the matching texts into each row's ``note`` as ``"<field>: <text>"`` segments
joined by ``"; "``. ``check`` fails on a disagreement whose field has no
segment in the row's note, and on a note that differs from what the notes file
gives (a note typed into tensorflow.toml by hand, or a stale one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envlock.matrix.schema import Checker, show
from envlock.matrix.tensorflow import TFMatrix, TFRelease
from envlock.matrix.tested import TestedConfigs, format_python_range, python3_minors

NOTES_FILENAME = "tf-notes.toml"
NOTES_SCHEMA = 1
FIELDS = ("table", "cuda_build", "python", "cuda", "cudnn")
SEPARATOR = "; "


@dataclass(frozen=True)
class Disagreement:
    version: Version
    field: str  # one of FIELDS
    matrix: str  # what the wheel (tensorflow.toml) says
    table: str  # what the tested-configurations table says

    def describe(self) -> str:
        return (
            f"{self.version}: {self.field}: wheels say {self.matrix}, "
            f"tested-configs say {self.table}"
        )


@dataclass(frozen=True)
class Note:
    releases: tuple[SpecifierSet, ...]  # any of them
    field: str
    text: str
    matrix: str | None = None
    table: str | None = None

    def explains(self, d: Disagreement) -> bool:
        return (
            d.field == self.field
            and any(r.contains(d.version, prereleases=True) for r in self.releases)
            and (self.matrix is None or self.matrix == d.matrix)
            and (self.table is None or self.table == d.table)
        )


@dataclass(frozen=True)
class Finding:
    disagreement: Disagreement
    explained: bool
    note: str  # the row's segment for this field, "" if none

    def to_dict(self) -> dict[str, Any]:
        d = self.disagreement
        return {
            "version": str(d.version),
            "field": d.field,
            "wheels": d.matrix,
            "tested_configs": d.table,
            "explained": self.explained,
            "note": self.note,
        }


@dataclass(frozen=True)
class CheckReport:
    files: tuple[str, ...]  # files that validated
    findings: tuple[Finding, ...]
    note_problems: tuple[str, ...]  # rows whose note differs from the notes file

    @property
    def ok(self) -> bool:
        return all(f.explained for f in self.findings) and not self.note_problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "files": list(self.files),
            "disagreements": [f.to_dict() for f in self.findings],
            "unexplained": sum(1 for f in self.findings if not f.explained),
            "note_problems": list(self.note_problems),
        }


def disagreements(rel: TFRelease, tested: TestedConfigs) -> list[Disagreement]:
    """Where ``rel`` and the table row for its series differ, in FIELDS order."""
    version = Version(str(rel.version))
    cfg = tested.for_release(version)
    if cfg is None:
        if rel.prerelease:
            # upstream's table gains a series' row with its final release: a release
            # candidate before it has nothing to disagree with (its final will)
            return []
        series = ".".join(str(p) for p in rel.version.release[:2])
        return [Disagreement(version, "table", str(rel.version), f"no row for {series}")]
    out: list[Disagreement] = []
    if not rel.cuda_build:
        out.append(Disagreement(version, "cuda_build", "not a CUDA build", f"CUDA {cfg.cuda}"))
    wheels = format_python_range(rel.python)
    table = format_python_range(python3_minors(cfg.python_minors))
    if wheels != table:
        out.append(Disagreement(version, "python", wheels, table))
    if rel.cuda != cfg.cuda:
        out.append(Disagreement(version, "cuda", rel.cuda, cfg.cuda))
    if rel.cudnn != cfg.cudnn:
        out.append(Disagreement(version, "cudnn", rel.cudnn, cfg.cudnn))
    return out


def note_for(found: Sequence[Disagreement], notes: Sequence[Note]) -> str:
    """The ``note`` a row gets: one ``field: text`` segment per explained disagreement."""
    segments: list[str] = []
    for d in found:
        for n in notes:
            if n.explains(d):
                segments.append(f"{d.field}: {n.text}")
                break
    return SEPARATOR.join(segments)


def _segment(note: str, field: str) -> str:
    for seg in note.split(SEPARATOR) if note else []:
        if seg.startswith(f"{field}: "):
            return seg
    return ""


NOTES_HINT = "each [[notes]] entry needs releases (a specifier), field and text"
_NOTE_FIELDS = ("releases", "field", "text", "matrix", "table")


def _note(c: Checker, raw: Any, path: str) -> Note:
    row = c.table(raw, path, _NOTE_FIELDS)
    releases = row.get("releases")
    if isinstance(releases, list) and releases:  # any of them
        items = c.strings(row, "releases", path)
        specs = [c.specifier(item, f"{path}.releases[{j}]") for j, item in enumerate(items)]
    elif isinstance(releases, str) or releases is None:
        specs = [c.specifier(c.string(row, "releases", path), f"{path}.releases")]
    else:
        raise c.fail(
            f"{path}.releases",
            f"expected a version specifier or a non-empty list of them, got {show(releases)}",
        )
    field = c.choice(row, "field", path, FIELDS)
    text = c.string(row, "text", path).strip()
    if SEPARATOR in text or "\n" in text:
        raise c.fail(f"{path}.text", f"must be one line without {SEPARATOR!r}")
    return Note(
        releases=tuple(specs),
        field=field,
        text=text,
        matrix=c.string(row, "matrix", path, empty=True) if "matrix" in row else None,
        table=c.string(row, "table", path, empty=True) if "table" in row else None,
    )


def parse_notes(doc: Mapping[str, Any], filename: str) -> tuple[Note, ...]:
    c = Checker(filename, NOTES_HINT)
    c.table(doc, "", ("schema_version", "notes"))
    c.schema_version(doc, NOTES_SCHEMA)
    rows = c.rows(doc, "notes", required=False)
    return tuple(_note(c, raw, f"notes[{i}]") for i, raw in enumerate(rows))


def load_notes(path: Path | None = None) -> tuple[Note, ...]:
    from envlock.matrix import read_toml

    doc, _digest, shown = read_toml(NOTES_FILENAME, path)
    return parse_notes(doc, shown)


def apply_notes(matrix: TFMatrix, tested: TestedConfigs, notes: Sequence[Note]) -> TFMatrix:
    """The same matrix with every row's ``note`` recomputed from the notes file."""
    from dataclasses import replace

    rows = tuple(
        replace(r, note=note_for(disagreements(r, tested), notes)) for r in matrix.releases
    )
    return replace(matrix, releases=rows)


def cross_check(
    matrix: TFMatrix, tested: TestedConfigs, notes: Sequence[Note], files: Sequence[str] = ()
) -> CheckReport:
    findings: list[Finding] = []
    problems: list[str] = []
    for rel in matrix.releases:
        found = disagreements(rel, tested)
        for d in found:
            seg = _segment(rel.note, d.field)
            findings.append(Finding(d, bool(seg), seg))
        expected = note_for(found, notes)
        if rel.note != expected:
            problems.append(
                f"{rel.version}: note {rel.note!r} differs from what {NOTES_FILENAME} gives "
                f"({expected!r})"
            )
    return CheckReport(tuple(files), tuple(findings), tuple(problems))


def check_all(tensorflow_path: Path | None = None) -> CheckReport:
    """Validate every matrix file and cross-check tensorflow.toml.

    A file that does not validate raises DataError (exit 2); disagreements are
    returned in the report.
    """
    from envlock.matrix import display_name, load_cuda, load_gpus, load_tensorflow
    from envlock.matrix import tested as tested_mod

    matrix = load_tensorflow(tensorflow_path)
    files = [str(tensorflow_path) if tensorflow_path else display_name("tensorflow.toml")]
    load_cuda()
    files.append(display_name("cuda.toml"))
    load_gpus()
    files.append(display_name("gpus.toml"))
    from envlock.matrix import libraries

    libraries.load_file()
    files.append(display_name(libraries.FILENAME))
    from envlock.matrix import cudawheels

    cudawheels.load_file()
    files.append(display_name(cudawheels.FILENAME))
    from envlock.matrix import paths as paths_mod

    paths_mod.load_file()
    files.append(display_name(paths_mod.FILENAME))
    from envlock.matrix import builds

    for project in builds.PROJECTS:
        builds.load_file(project)
        files.append(display_name(f"{project}.toml"))
        if builds.published(project) is not None:
            files.append(display_name(f"{project}-published.toml"))
    tested = tested_mod.load()
    files.append(display_name(tested_mod.FILENAME))
    notes = load_notes()
    files.append(display_name(NOTES_FILENAME))
    return cross_check(matrix, tested, notes, files)
