"""Known errors as data: the messages of a training log, recognised and explained.

The entries live in ``envlock/data/known_errors.toml`` (package data, beside
the matrices and templates; read through ``envlock.resources``), validated by
the matrices' ``Checker`` so a damaged entry names its path. ``match_log``
searches each line of a log for each entry's pattern and returns one
``LogMatch`` per entry found (with the count, the first line and its number);
an unrelated log gives none. ``explain`` turns matches into findings whose fix
fills in what the lock knows.

A log is read through ``BoundedLog``: at most ``MAX_LINE_BYTES`` of one line
are kept (the rest of a longer line is read and skipped), and reading stops
after ``MAX_LOG_BYTES`` in all or ``MAX_LOG_LINES`` lines, saying so in
``cut``; so ``--log /dev/zero`` or a pipe that never ends is done in seconds
with bounded memory. Every pattern must run in time linear in the line: no
nested or adjacent repeats that can share characters, no unbounded repeat
before a part that may fail (``tests/test_doctor_knownerrors.py`` times each
shipped pattern on a crafted worst case against a plain log).
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from envlock.doctor.advice import Finding
from envlock.model import Resolution

FILENAME = "known_errors.toml"
SCHEMA_VERSION = 1
SEVERITIES = ("FAIL", "WARN", "INFO")
FIELDS = (
    "id",
    "pattern",
    "after",
    "severity",
    "cause",
    "fix",
    "fix_without_lock",
    "manual",
    "cpu_fallback",
    "source",
)
# what a lock (or the installed release) knows; cuda_libraries says where this
# lock's CUDA and cuDNN come from (the base image for system CUDA, the locked
# nvidia-* wheels for pip CUDA). A fix naming one of these needs a
# fix_without_lock for a log read alone; both may name the pattern's own groups
# (what the log line says: "{library}", "{compiled}").
PLACEHOLDERS = (
    "tensorflow",
    "cuda",
    "cudnn",
    "driver_min",
    "base_image",
    "lock_dir",
    "cuda_libraries",
)
ID: tuple[str, str] = (r"[a-z0-9]+(?:-[a-z0-9]+)*", "lower-case-words")
MAX_LINE = 4096  # characters of one log line searched (a progress bar can be megabytes)
MAX_LINE_BYTES = 16 * 1024  # bytes of one line kept; the rest of the line is skipped
MAX_LOG_BYTES = 32 * 1024 * 1024  # bytes of a log read in all
MAX_LOG_LINES = 1_000_000  # lines of a log read in all


@dataclass(frozen=True)
class KnownError:
    id: str
    pattern: re.Pattern[str]
    severity: str
    cause: str
    fix: str  # may hold {placeholders} of PLACEHOLDERS and the pattern's named groups
    source: str
    fix_without_lock: str = ""  # the fix when nothing names the release: groups only
    manual: bool = True  # False: the filled fix is one command to paste
    # the line must come right after one this matches (blank lines between skipped):
    # output that means something only after the command that printed it ("[]")
    after: re.Pattern[str] | None = None
    # the line says TensorFlow runs on the CPU: no failure when the CPU is meant
    cpu_fallback: bool = False


@dataclass(frozen=True)
class LogMatch:
    error: KnownError
    count: int
    line_number: int  # of the first match, from 1
    line: str  # the first matching line, stripped and shortened
    groups: Mapping[str, str] | None = None  # the pattern's named groups in that line


def parse(doc: Mapping[str, object], filename: str = FILENAME) -> tuple[KnownError, ...]:
    """Validate the document; every problem is a DataError naming its path."""
    from envlock.matrix.schema import Checker

    check = Checker(filename, "reinstall envlock; the known-errors data shipped with it is damaged")
    check.table(doc, "", ("schema_version", "data_version", "errors"))
    check.header(doc, SCHEMA_VERSION)
    out: list[KnownError] = []
    formatter = string.Formatter()
    for i, row in enumerate(check.rows(doc, "errors")):
        path = f"errors[{i}]"
        entry = check.table(row, path, FIELDS)
        ident = check.string(entry, "id", path, ID)
        text = check.string(entry, "pattern", path)
        try:
            pattern = re.compile(text)
        except re.error as e:
            raise check.fail(f"{path}.pattern", f"not a regular expression: {e}") from None
        if pattern.search(""):
            raise check.fail(f"{path}.pattern", "matches an empty line")
        after: re.Pattern[str] | None = None
        after_text = check.string(entry, "after", path, required=False)
        if after_text:
            try:
                after = re.compile(after_text)
            except re.error as e:
                raise check.fail(f"{path}.after", f"not a regular expression: {e}") from None
        groups = tuple(pattern.groupindex)
        fix = check.string(entry, "fix", path)
        lockless = check.string(entry, "fix_without_lock", path, required=False)

        def names_in(text: str, where: str, allowed: tuple[str, ...]) -> list[str]:
            try:
                names = [name for _, name, _, _ in formatter.parse(text) if name is not None]
            except ValueError as e:
                raise check.fail(where, f"bad placeholder: {e}") from None
            for name in names:
                if name not in allowed:
                    raise check.fail(
                        where, f"unknown placeholder {{{name}}}", hint=", ".join(allowed)
                    )
            return names

        cause = check.string(entry, "cause", path)
        names_in(cause, f"{path}.cause", groups)
        used = names_in(fix, f"{path}.fix", (*PLACEHOLDERS, *groups))
        names_in(lockless, f"{path}.fix_without_lock", groups)
        if any(name in PLACEHOLDERS for name in used) and not lockless:
            raise check.fail(
                f"{path}.fix_without_lock",
                "missing: the fix names what a lock knows, and a log read alone has no lock",
            )
        out.append(
            KnownError(
                id=ident,
                pattern=pattern,
                severity=check.choice(entry, "severity", path, SEVERITIES),
                cause=cause,
                fix=fix,
                source=check.string(entry, "source", path),
                fix_without_lock=lockless,
                manual=check.boolean(entry, "manual", path, default=True),
                after=after,
                cpu_fallback=check.boolean(entry, "cpu_fallback", path, default=False),
            )
        )
    check.distinct("errors", "id", [e.id for e in out])
    return tuple(out)


def load() -> tuple[KnownError, ...]:
    """The entries shipped with envlock."""
    from envlock.errors import DataError
    from envlock.readers import decode_text, parse_toml
    from envlock.resources import data_root

    raw = (data_root() / FILENAME).read_bytes()
    text = decode_text(raw, FILENAME, error=DataError)
    return parse(parse_toml(text, FILENAME, error=DataError))


class BoundedLog:
    """The lines of a log read with ``readline(limit)`` (a binary or text
    stream's), undecodable bytes replaced, within the bounds above. After the
    iteration, ``cut`` says why reading stopped early ("" when it read all)."""

    def __init__(self, readline: Callable[[int], bytes | str]) -> None:
        self._readline = readline
        self.cut = ""

    def __iter__(self) -> Iterator[str]:
        total = lines = 0
        first: str | None = None  # the kept part of the line being read
        while True:
            if total >= MAX_LOG_BYTES or lines >= MAX_LOG_LINES:
                if self._readline(1):
                    self.cut = (
                        f"read up to {MAX_LOG_BYTES // (1024 * 1024)} MiB"
                        if total >= MAX_LOG_BYTES
                        else f"read up to {MAX_LOG_LINES:,} lines"
                    )
                if first is not None:
                    yield first
                return
            chunk = self._readline(min(MAX_LINE_BYTES, MAX_LOG_BYTES - total))
            if not chunk:
                if first is not None:
                    yield first
                return
            total += len(chunk)
            text = chunk.decode("utf-8", "replace") if isinstance(chunk, bytes) else chunk
            if first is None:
                first = text
            if text.endswith("\n"):
                yield first
                first = None
                lines += 1


_MEMO_LINES = 4096  # distinct lines whose matches are kept (a log repeats its lines)
_MEMO_WIDTH = 1024  # characters of a line kept so (at most ~16 MiB in all)


def match_log(lines: Iterable[str], known: Iterable[KnownError]) -> list[LogMatch]:
    """One match per known error found in the log, in the order of first sight.

    Every line is searched with every pattern, but a line seen before (a log
    repeats its warnings, its progress lines, "Killed" a million times) is not
    searched again: the matches of the first ``_MEMO_LINES`` distinct lines (of
    at most ``_MEMO_WIDTH`` characters) are kept. An entry with ``after``
    depends on the line before, so it is searched each time."""
    entries = list(known)
    free = [(i, e.id, e.pattern.search) for i, e in enumerate(entries) if e.after is None]
    bound = [
        (i, e.id, e.after.search, e.pattern.search)
        for i, e in enumerate(entries)
        if e.after is not None
    ]
    seen: dict[str, list[tuple[int, str, re.Match[str]]]] = {}
    first: dict[str, tuple[int, str, dict[str, str]]] = {}
    counts: dict[str, int] = {}
    previous = ""  # the last line that was not blank
    for number, raw in enumerate(lines, 1):
        line = raw[:MAX_LINE].rstrip("\r\n")
        hits = seen.get(line)
        if hits is None:
            hits = [(i, ident, m) for i, ident, search in free if (m := search(line))]
            if len(seen) < _MEMO_LINES and len(line) <= _MEMO_WIDTH:
                seen[line] = hits
        if bound:
            more = [
                (i, ident, m)
                for i, ident, after, search in bound
                if after(previous) and (m := search(line))
            ]
            if more:
                hits = sorted(hits + more, key=lambda hit: hit[0])  # the entries' order
        for _, ident, m in hits:
            counts[ident] = counts.get(ident, 0) + 1
            if ident not in first:
                found = {k: v for k, v in m.groupdict().items() if v is not None}
                first[ident] = (number, line.strip()[:300], found)
        if line.strip():
            previous = line
    by_id = {e.id: e for e in entries}
    order = sorted(first, key=lambda ident: first[ident][0])
    return [LogMatch(by_id[i], counts[i], *first[i]) for i in order]


class _Shown(dict[str, str]):
    """Placeholder values; a group the line did not fill reads as "?"."""

    def __missing__(self, key: str) -> str:
        return "?"


def cuda_libraries(expected: Resolution, lock_dir: str | None) -> str:
    """Where this lock's CUDA and cuDNN come from, as a fix says it."""
    if expected.cuda_source == "pip":
        where = f"envlock restore {lock_dir}" if lock_dir else "the locked requirements.txt"
        return (
            f"the nvidia-* wheels the lock holds for CUDA {expected.cuda} and cuDNN "
            f"{expected.cudnn} ({where} installs them)"
        )
    return (
        f"CUDA {expected.cuda} and cuDNN {expected.cudnn} from the system: the base image "
        f"{expected.base_image}, or a host with them installed (this lock uses no nvidia-* wheels)"
    )


def fill(
    error: KnownError,
    expected: Resolution | None,
    lock_dir: str | None,
    groups: Mapping[str, str] | None = None,
) -> str:
    """The entry's fix with what the lock (or the installed release) knows and what
    the log line says filled in; without a release, the fix that needs none."""
    values = _Shown(groups or {})
    if expected is None or (lock_dir is None and "{lock_dir}" in error.fix):
        return (
            error.fix_without_lock.format_map(values)
            if error.fix_without_lock
            else (error.fix.format_map(values))
        )
    values.update(
        {
            "tensorflow": expected.version,
            "cuda": expected.cuda,
            "cudnn": expected.cudnn,
            "driver_min": expected.driver_min,
            "base_image": expected.base_image,
            "lock_dir": lock_dir or "DIR",
            "cuda_libraries": cuda_libraries(expected, lock_dir),
        }
    )
    return error.fix.format_map(values)


def explain(
    matches: Iterable[LogMatch],
    expected: Resolution | None,
    lock_dir: str | None,
    *,
    allow_cpu: bool = False,
) -> list[Finding]:
    """A finding per match. ``allow_cpu`` (doctor --allow-cpu: the CPU is meant):
    a line that says TensorFlow runs on the CPU is a WARN, not a FAIL."""
    out: list[Finding] = []
    for m in matches:
        times = f" ({m.count} times)" if m.count > 1 else ""
        severity, meant = m.error.severity, ""
        if allow_cpu and m.error.cpu_fallback and severity == "FAIL":
            severity, meant = "WARN", " (--allow-cpu: the CPU is meant, so no failure)"
        out.append(
            Finding(
                f"log {m.error.id}",
                severity,
                f"line {m.line_number}{times}: {m.line!r}: "
                + m.error.cause.format_map(_Shown(m.groups or {}))
                + meant,
                fill(m.error, expected, lock_dir, m.groups),
                manual=m.error.manual,
            )
        )
    return out
