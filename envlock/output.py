"""Printing for people and machines. Rich is imported only when drawing."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

# What a terminal acts on instead of showing: C0 controls but newline and tab
# (ESC starts the sequences that move the cursor, repaint a line or set a window
# title), DEL, C1 controls (U+009B is a one-character CSI), and the bidirectional
# overrides that reorder what a reader sees.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def escaped(text: str, *, newlines: bool = False) -> str:
    """``text`` with every character a terminal would act on shown as an escape
    (``\\x1b``, ``\\u202e``); ``newlines``: newline and tab too (a table cell)."""
    pattern = _CONTROLS if not newlines else _CELL
    return pattern.sub(_escape, text)


_CELL = re.compile(_CONTROLS.pattern[:1] + "\t\n" + _CONTROLS.pattern[1:])


def first_control(text: str) -> str | None:
    """The first character of ``text`` a terminal would act on, as ``U+XXXX``; else None."""
    m = _CONTROLS.search(text)
    return f"U+{ord(m.group()):04X}" if m else None


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class EscapingWriter:
    """A text stream that shows terminal controls escaped (``escaped``): stdout
    carries results made of text from files, indexes, registries and reports."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(escaped(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def dumps(obj: Any) -> str:
    """The ``--json`` layout: ``json.dumps(obj, indent=2, ensure_ascii=False)``
    plus a newline; what a terminal would act on and JSON leaves raw (DEL, C1,
    the bidi overrides) written as ``\\uXXXX`` escapes (JSON's own, decoding to
    the same text)."""
    text = json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
    return _CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def emit_json(obj: Any) -> None:
    sys.stdout.write(dumps(obj))


def stderr_is_tty() -> bool:
    return sys.stderr.isatty()


DEFAULT_WIDTH = 100
_MIN_COLUMN = 8
FORMATS = ("text", "html")


def width() -> int:
    """The width text output fits: ``COLUMNS`` when set, else the terminal's width
    when stdout is a terminal, else 100 (a pipe, a file, a notebook's subprocess)."""
    import shutil

    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


def table(headers: Sequence[str] | None, rows: Sequence[Sequence[str]]) -> str:
    """A table for stdout: aligned text that fits ``width()``, long cells wrapped
    under their row in their column (``text_table``); a ``<table>`` when stdout is
    an ``HtmlWriter`` (ENVLOCK_FORMAT=html). ``headers`` None: no header row."""
    out = sys.stdout
    if isinstance(out, HtmlWriter):
        return out.table(headers, rows)
    return text_table(headers, rows, width())


def text_table(headers: Sequence[str] | None, rows: Sequence[Sequence[str]], width: int) -> str:
    """A plain aligned text table, stable for tests and pipes. When its natural
    width exceeds ``width``, the widest columns are narrowed (``_fit``: short key
    columns keep their width) and their cells wrapped (``textwrap``) on the lines
    under their row, in their column. A word longer than its column (a path, a
    digest, a keyid, a command) is never split: it overflows its line, so it can
    still be copied whole."""
    head = None if headers is None else [escaped(h, newlines=True) for h in headers]
    body = [[escaped(c, newlines=True) for c in row] for row in rows]
    n = max([len(head or ())] + [len(row) for row in body])
    grid = ([head] if head is not None else []) + body
    grid = [row + [""] * (n - len(row)) for row in grid]
    natural = [max((len(row[i]) for row in grid), default=0) for i in range(n)]
    widths = _fit(natural, grid, head, width - 2 * (n - 1))
    lines = []
    for k, row in enumerate(grid):
        lines += _row_lines(row, widths)
        if k == 0 and head is not None:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


def _fit(natural: list[int], grid: list[list[str]], head: list[str] | None, room: int) -> list[int]:
    """Column widths summing to at most ``room``: the natural ones when they fit;
    else the narrow columns keep theirs (the widest are cut to one cap, never
    below their header), and the cut ones share what is left, each keeping its
    longest word where the room allows (the longest words split first)."""
    if sum(natural) <= room:
        return natural
    n = len(natural)
    heads = [len(h) for h in head] if head is not None else [0] * n
    least = [min(m, max(h, _MIN_COLUMN)) for m, h in zip(natural, heads, strict=True)]
    cut = [i for i, w in enumerate(_capped(natural, least, room)) if w < natural[i]]
    left = room - sum(w for i, w in enumerate(natural) if i not in cut)
    words = [max((len(w) for row in grid for w in row[i].split()), default=0) for i in cut]
    whole = [min(natural[i], max(heads[i], w)) for i, w in zip(cut, words, strict=True)]
    floors = _capped(whole, [least[i] for i in cut], left)
    widths = list(natural)
    for i, w in zip(cut, _capped([natural[i] for i in cut], floors, left), strict=True):
        widths[i] = w
    return widths


def _capped(want: list[int], floors: list[int], room: int) -> list[int]:
    """``want`` with every width above the largest cap that fits ``room`` cut to
    it, never below ``floors`` (``floors`` when even they do not fit)."""
    for cap in range(max(want, default=0), -1, -1):
        widths = [min(w, max(f, cap)) for w, f in zip(want, floors, strict=True)]
        if sum(widths) <= room:
            return widths
    return floors


def _row_lines(row: list[str], widths: list[int]) -> list[str]:
    import textwrap

    cells = [
        [c]
        if len(c) <= w
        else textwrap.wrap(c, w, break_on_hyphens=False, break_long_words=False) or [""]
        for c, w in zip(row, widths, strict=True)
    ]
    return [
        "  ".join(
            (c[k] if k < len(c) else "").ljust(w) for c, w in zip(cells, widths, strict=True)
        ).rstrip()
        for k in range(max(len(c) for c in cells))
    ]


def bullets(mark: str, texts: Sequence[str]) -> str:
    """``texts`` as a list, each line starting with ``mark`` and wrapped to ``width()``
    under it (not wrapped in HTML: the page wraps its ``<pre>``)."""
    if isinstance(sys.stdout, HtmlWriter):
        return "".join(f"{mark}{t}\n" for t in texts)
    import textwrap

    indent, room = " " * len(mark), width()
    return "".join(
        "\n".join(
            textwrap.wrap(
                t, room, initial_indent=mark, subsequent_indent=indent, break_on_hyphens=False
            )
            or [mark.rstrip()]
        )
        + "\n"
        for t in texts
    )


def format_from_env() -> str:
    """ENVLOCK_FORMAT: ``text`` (unset or empty too) or ``html``; else a UsageError."""
    value = os.environ.get("ENVLOCK_FORMAT", "").strip().lower() or "text"
    if value not in FORMATS:
        from envlock.errors import UsageError

        raise UsageError(
            f"ENVLOCK_FORMAT={os.environ['ENVLOCK_FORMAT']!r}: "
            "not a format envlock writes (text or html)",
            hint="unset it, or set ENVLOCK_FORMAT=html (one HTML fragment on stdout) "
            "or ENVLOCK_FORMAT=text",
        )
    return value


_CELL_STYLE = "text-align:left;vertical-align:top;white-space:pre-wrap"


class HtmlWriter:
    """stdout under ENVLOCK_FORMAT=html (the notebook extension shows it with
    IPython.display.HTML): what commands write is kept, and ``close`` writes one
    HTML fragment to ``inner``: each ``table()`` a ``<table>`` (header row, every
    cell escaped and whole), the text around them escaped in ``<pre>`` blocks, in
    the order written. A table stands in the text as a token with a random part,
    so text from a file or an index cannot pose as one."""

    def __init__(self, inner: TextIO) -> None:
        import secrets

        self._inner = inner
        self._parts: list[str] = []
        self._tables: list[str] = []
        self._token = f"\ue000envlock-table-{secrets.token_hex(8)}-"

    def write(self, text: str) -> int:
        self._parts.append(text)
        return len(text)

    def flush(self) -> None:
        """Nothing to flush before ``close``: the fragment is written whole."""

    def table(self, headers: Sequence[str] | None, rows: Sequence[Sequence[str]]) -> str:
        import html

        def cells(tag: str, row: Sequence[str]) -> str:
            return "".join(
                f'<{tag} style="{_CELL_STYLE}">{html.escape(escaped(c, newlines=True))}</{tag}>'
                for c in row
            )

        lines = ['<table class="envlock">']
        if headers is not None:
            lines.append(f"<thead><tr>{cells('th', headers)}</tr></thead>")
        lines.append("<tbody>")
        lines += [f"<tr>{cells('td', row)}</tr>" for row in rows]
        lines.append("</tbody></table>")
        self._tables.append("\n".join(lines) + "\n")
        return f"{self._token}{len(self._tables) - 1}\ue001\n"

    def fragment(self) -> str:
        """The HTML of what was written so far."""
        import html

        pattern = re.compile(re.escape(self._token) + "([0-9]+)\ue001\n?")
        out, text, at = [], "".join(self._parts), 0
        for m in [*pattern.finditer(text), None]:
            block = text[at : m.start() if m else len(text)].strip("\n")
            if block:
                out.append(
                    f'<pre style="white-space:pre-wrap">{html.escape(escaped(block))}</pre>\n'
                )
            if m:
                out.append(self._tables[int(m.group(1))])
                at = m.end()
        return '<div class="envlock">\n' + "".join(out) + "</div>\n"

    def close(self) -> None:
        """Write the fragment to the stream it wraps (a closed pipe is no error)."""
        try:
            self._inner.write(self.fragment())
            self._inner.flush()
        except BrokenPipeError:
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def stdout_writer(inner: TextIO, fmt: str) -> EscapingWriter | HtmlWriter:
    """What ``main`` puts in place of stdout: an ``HtmlWriter`` for ``html``, else
    an ``EscapingWriter``."""
    return HtmlWriter(inner) if fmt == "html" else EscapingWriter(inner)


REASON_WIDTH = 90


def short(text: str, width: int = REASON_WIDTH) -> str:
    """``text`` on one line for a table cell: at most ``width`` characters, cut at a word
    with "..." when longer (the whole text stays in ``--json`` and in the files); in
    HTML (stdout an ``HtmlWriter``) never cut, the page wraps it."""
    text = " ".join(str(text).split())
    if len(text) <= width or isinstance(sys.stdout, HtmlWriter):
        return text
    cut = text[: width - 3]
    space = cut.rfind(" ")
    if space > width // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:(") + "..."


def wrote(path: object, what: str) -> None:
    """Say on stderr where a command wrote a file ("envlock: wrote the report to PATH")."""
    sys.stderr.write(f"envlock: wrote {what} to {path}\n")


def progress(message: str) -> None:
    """A progress line on stderr, only when stderr is a terminal (lock, check)."""
    if stderr_is_tty():
        sys.stderr.write(message + "\n")
        sys.stderr.flush()


def finish(result: Any, as_json: bool) -> int:
    """Print a command's typed result and give its exit status: with ``--json`` its
    ``to_dict()`` (``dumps``), else its ``text()``; then the failure it carries, if
    any (``result.failure``, an ``EnvlockError``), is raised, after the printing as
    the commands always did; else ``result.exit_code`` (0 when it has none)."""
    if as_json:
        emit_json(result.to_dict())
    else:
        sys.stdout.write(result.text())
    if isinstance(result, Printed):
        sys.stderr.write(result.stderr + ("" if as_json else result.text_stderr))
    failure = getattr(result, "failure", None)
    if failure is not None:
        raise failure
    code: int = getattr(result, "exit_code", 0)
    return code


def notes(lines: Sequence[str], kind: str = "note") -> None:
    """Each line on stderr as ``envlock: note: LINE`` (``kind``: note, warning)."""
    for line in lines:
        sys.stderr.write(f"envlock: {kind}: {line}\n")


@dataclass(frozen=True)
class Printed:
    """A result laid out by the library for ``finish``: ``doc`` for --json, ``body``
    for text; ``stderr`` written after either, ``text_stderr`` after the text only
    (a failed check's summary and hint), then ``exit_code``."""

    doc: Any
    body: str = ""
    exit_code: int = 0
    stderr: str = ""
    text_stderr: str = ""
    failure: Exception | None = None  # raised by finish after printing

    def to_dict(self) -> Any:
        return self.doc

    def text(self) -> str:
        return self.body
