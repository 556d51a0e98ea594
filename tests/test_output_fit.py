"""Output that fits (issue 22): tables and lists fit COLUMNS, else the terminal,
else 100 columns; long cells wrap under their row in their column, a word longer
than its column overflows whole; ENVLOCK_FORMAT=html makes stdout one HTML
fragment with every cell escaped and whole; --json is unchanged by both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from envlock import output
from envlock.output import HtmlWriter, text_table

ENVLOCK = [sys.executable, "-m", "envlock"]
ROOT = Path(__file__).resolve().parent.parent

REASON = (
    "the newest of 3.9-3.11 (the release's wheels) that an Ubuntu of the image ships as "
    "its own python3, so no standalone CPython is needed"
)
PATH = "/srv/projects/a-long-project-name/.venv.envlock-12/lib/python3.10/site-packages"


def cli(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """envlock as a user runs it in a pipe (stdout is no terminal); COLUMNS only if given."""
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "ENVLOCK_FORMAT")}
    return subprocess.run(
        [*ENVLOCK, *argv],
        capture_output=True,
        text=True,
        env={**environ, **env},
        cwd=ROOT,
        timeout=120,
    )


def test_a_long_cell_wraps_under_its_row_and_keeps_every_word() -> None:
    rows = [["python", REASON], ["cuda", "12.2"]]
    text = text_table(["check", "reason"], rows, 60)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 60
    assert lines[0].startswith("check   reason") and set(lines[1]) == {"-", " "}
    start = lines[0].index("reason")
    wrapped = [line[start:] for line in lines[2:-1]]
    assert all(line[:start].strip() in ("", "python") for line in lines[2:-1])
    assert " ".join(wrapped) == REASON  # every word, in order, in its column
    assert lines[-1].split() == ["cuda", "12.2"]


def test_a_word_longer_than_its_column_overflows_whole() -> None:
    text = text_table(None, [["path", f"in {PATH} now"]], 40)
    assert PATH in text.splitlines()[1]  # copied whole from one line
    assert [line.split()[-1] for line in text.splitlines()[1:]][-1] == "now"


def test_a_table_that_fits_is_left_as_it_is() -> None:
    assert text_table(["a", "b"], [["x", "y"]], 100) == "a  b\n-  -\nx  y\n"


def test_width_is_columns_else_100_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "72")
    assert output.width() == 72
    monkeypatch.delenv("COLUMNS")
    assert output.width() == 100  # pytest's stdout is no terminal


@pytest.mark.parametrize(("columns", "most"), [("80", 80), (None, 100), ("300", 300)])
def test_resolve_fits_the_width_it_is_given(columns: str | None, most: int) -> None:
    done = cli("resolve", "tensorflow==2.15", **({"COLUMNS": columns} if columns else {}))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= most
    if columns == "300":  # nothing to wrap: each why line is one line
        assert any(len(line) > 100 for line in lines)


def test_json_is_the_same_at_any_width() -> None:
    narrow = cli("resolve", "tensorflow==2.15", "--json", COLUMNS="40")
    wide = cli("resolve", "tensorflow==2.15", "--json", COLUMNS="300")
    html = cli("resolve", "tensorflow==2.15", "--json", ENVLOCK_FORMAT="html")
    assert narrow.returncode == wide.returncode == html.returncode == 0
    assert narrow.stdout == wide.stdout == html.stdout
    json.loads(narrow.stdout)


class Fragment(HTMLParser):
    """The tags, table cells and <pre> texts of an HTML fragment."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.cells: list[str] = []
        self.pres: list[str] = []
        self._into: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag in ("td", "th"):
            self.cells.append("")
            self._into = self.cells
        elif tag == "pre":
            self.pres.append("")
            self._into = self.pres

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th", "pre"):
            self._into = None

    def handle_data(self, data: str) -> None:
        if self._into is not None:
            self._into[-1] += data


def test_html_is_one_fragment_with_the_facts_whole() -> None:
    done = cli("resolve", "tensorflow==2.15", ENVLOCK_FORMAT="html", COLUMNS="40")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith('<div class="envlock">\n') and done.stdout.endswith("</div>\n")
    page = Fragment()
    page.feed(done.stdout)
    assert page.tags.count("div") == 1 and page.tags.count("table") == 1
    doc = json.loads(cli("resolve", "tensorflow==2.15", "--json").stdout)
    cells = dict(zip(page.cells[::2], page.cells[1::2], strict=True))
    assert cells["release"] == f"tensorflow {doc['version']}"
    assert cells["driver"] == f">= {doc['driver_min']}"
    assert cells["base image"] == doc["base_image"]
    why = "\n".join(page.pres)
    for reason in doc["reasons"]:  # not wrapped at COLUMNS: the page wraps it
        assert f"  - {reason}\n" in why + "\n"


def test_html_escapes_what_it_shows_and_text_cannot_pose_as_a_table() -> None:
    class Sink:
        def __init__(self) -> None:
            self.text = ""

        def write(self, s: str) -> int:
            self.text += s
            return len(s)

        def flush(self) -> None:
            pass

    sink = Sink()
    writer = HtmlWriter(sink)  # type: ignore[arg-type]
    writer.write("before <b>bold</b> & \x1b[31mred\n")
    writer.write(writer.table(["name"], [["<script>x</script>"]]))
    writer.write("\ue000envlock-table-0000000000000000-0\ue001\nafter\n")
    writer.close()
    page = Fragment()
    page.feed(sink.text)
    assert "script" not in page.tags and "b" not in page.tags
    assert page.cells == ["name", "<script>x</script>"]
    assert page.pres[0] == "before <b>bold</b> & \\x1b[31mred"
    assert page.pres[1].endswith("after") and page.tags.count("table") == 1


def test_an_unknown_format_is_exit_2_with_the_ones_there_are() -> None:
    done = cli("resolve", "tensorflow==2.15", ENVLOCK_FORMAT="xml")
    assert done.returncode == 2 and done.stdout == ""
    assert "ENVLOCK_FORMAT='xml': not a format envlock writes (text or html)" in done.stderr
    assert "ENVLOCK_FORMAT=html" in done.stderr and "Traceback" not in done.stderr
