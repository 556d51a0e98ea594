"""The doctor's report as text: the findings' table, what is folded under a root
cause as one row, and the fix list, each way out under one heading.

Findings that share their ways out are said once, under the checks they fix; a
finding with several ways prints them as numbered alternatives ("either ...
or ..."), and a finding whose only fix is another one's first way joins that
one. Every line fits ``width``: prose (``do:`` steps, labels, headings) wraps
under its start; a ``run:`` command is broken only between its words outside
quotes, each broken line ending in `` \\`` (the shell's line continuation), so
the lines pasted together are the same command. A notebook cell line (``%...``,
``!...``) is never broken: IPython runs it as one line.
"""

from __future__ import annotations

import sys
import textwrap
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envlock.doctor.advice import DoctorReport, FindingDict, WayDict

ORDER = {"FAIL": 0, "WARN": 1, "INFO": 2, "PASS": 3}
FIRST_NAMES = 4  # a folded row or a heading names this many, then counts the rest
NO_WIDTH = 10**6  # HTML: the page wraps


def describe(doc: DoctorReport, width: int, *, verbose: bool = False) -> str:
    from envlock.output import HtmlWriter, table, text_table

    lines = [
        f"{doc['status']}" + (f": against the lock in {doc['lock']}" if doc.get("lock") else "")
    ]
    interp = doc.get("interpreter")
    if interp:
        python = doc.get("python")
        py = python.get("version", "?") if python else "?"
        lines.append(f"interpreter: {interp['python']} (Python {py}; {interp['reason']})")
    host = doc.get("host")
    if host:
        gpus = ", ".join(f"{g['name']} ({g['compute_capability']})" for g in host["gpus"]) or "none"
        lines.append(f"driver: {host['driver']} ({host['source']}); GPUs: {gpus}")
    if doc.get("freeze"):
        python = doc.get("python")
        said = f"Python {python['version']}" if python else "no Python given"
        lines.append(f"package list: {doc['freeze']} ({said}; no venv probed)")
    if doc.get("log"):
        lines.append(f"log: {doc['log']}")
    lines = [w for line in lines for w in _prose(line, "", "  ", width)]
    lines.append("")
    rows = []
    for f in doc["findings"]:
        rows.append([f["status"], f["check"], f["cause"]])
        rows += _folded_rows(f.get("folded", []), verbose)
    if rows:
        head = ["status", "check", "cause"]
        if isinstance(sys.stdout, HtmlWriter):
            lines.append(table(head, rows).rstrip())
        else:
            lines.append(text_table(head, rows, width).rstrip())
    else:
        lines.append("no findings")
    fixes = fix_lines(doc["findings"], width)
    if fixes:
        lines += [""]
        lines += _prose(
            "to fix ('run:' a command to paste as it stands, a line ending in \\ continues "
            "on the next; 'do:' a step by hand; of the ways under 'either', take one):",
            "",
            "",
            width,
        )
        lines += fixes
    return "\n".join(lines) + "\n"


def _folded_rows(folded: list[FindingDict], verbose: bool) -> list[list[str]]:
    """What a root cause causes: each row under --verbose, else one row with the
    count and the first few checks."""
    if not folded:
        return []
    if verbose:
        return [["", f"  {g['check']}", g["cause"]] for g in folded]
    return [
        [
            "",
            f"  {len(folded)} caused",
            _names([g["check"] for g in folded], " (--verbose or --json lists each)"),
        ]
    ]


def _names(names: list[str], more: str = "") -> str:
    shown = ", ".join(names[:FIRST_NAMES])
    if len(names) > FIRST_NAMES:
        return f"{shown} and {len(names) - FIRST_NAMES} more{more}"
    return shown


def _ways(f: FindingDict) -> list[WayDict]:
    if f.get("ways"):
        return f["ways"]
    kind = "do" if f.get("manual") else "run"
    return [{"label": "", "steps": [{"kind": kind, "text": f["fix"]}]}]


class _Entry:
    def __init__(self, check: str, ways: list[WayDict]) -> None:
        self.checks = [check]
        self.labels = [w["label"] for w in ways]
        self.steps = [[(s["kind"], s["text"]) for s in w["steps"]] for w in ways]

    def add(self, check: str, ways: list[WayDict]) -> None:
        if check not in self.checks:
            self.checks.append(check)
        for mine, way in zip(self.steps, ways, strict=True):
            new = [(s["kind"], s["text"]) for s in way["steps"]]
            for at, step in enumerate(new):
                if step in mine:
                    continue
                # before the step both share that follows it (a restart after every install)
                after = next((s for s in new[at + 1 :] if s in mine), None)
                mine.insert(mine.index(after) if after else len(mine), step)


def entries(findings: list[FindingDict]) -> list[_Entry]:
    """The fix list's entries: findings with the same ways out merged (alternatives
    with the same labels and first way: each way's steps joined), then each
    single-way entry that is an 'either' entry's first way moved into it."""
    out: list[_Entry] = []
    index: dict[object, _Entry] = {}
    for f in sorted(findings, key=lambda f: ORDER.get(f["status"], 9)):
        if f["status"] == "PASS" or not f.get("fix"):
            continue
        ways = _ways(f)
        first = tuple((s["kind"], s["text"]) for s in ways[0]["steps"])
        key = (tuple(w["label"] for w in ways), first) if len(ways) > 1 else first
        if key in index:
            index[key].add(f["check"], ways)
        else:
            index[key] = entry = _Entry(f["check"], ways)
            out.append(entry)
    for single in [e for e in out if len(e.steps) == 1]:
        home = next((e for e in out if len(e.steps) > 1 and e.steps[0] == single.steps[0]), None)
        if home is not None:
            home.checks = [*single.checks, *[c for c in home.checks if c not in single.checks]]
            out.remove(single)
    return out


def fix_lines(findings: list[FindingDict], width: int) -> list[str]:
    lines: list[str] = []
    for entry in entries(findings):
        either = len(entry.steps) > 1
        heading = _names(entry.checks) + (": either" if either else ":")
        lines += _prose(heading, "  ", "    ", width)
        if not either:
            lines += _steps(entry.steps[0], "    ", width)
            continue
        for n, (label, steps) in enumerate(zip(entry.labels, entry.steps, strict=True), 1):
            mark = f"    {n}) " if n == 1 else f"    or {n}) "
            lines += _prose(f"{label or 'this'}:", mark, " " * len(mark), width)
            lines += _steps(steps, " " * len(mark) + "  ", width)
    return lines


def _steps(steps: list[tuple[str, str]], indent: str, width: int) -> list[str]:
    out: list[str] = []
    for kind, text in steps:
        mark = f"{indent}{kind}: "
        if kind == "do":
            out += _prose(text, mark, " " * len(mark), width)
        else:
            out += command_lines(text, mark, " " * len(mark) + "  ", width)
    return out


def _prose(text: str, first: str, rest: str, width: int) -> list[str]:
    return textwrap.wrap(
        text,
        max(width, len(first) + 20),
        initial_indent=first,
        subsequent_indent=rest,
        break_on_hyphens=False,
        break_long_words=False,
    ) or [first.rstrip()]


def words(command: str) -> list[str]:
    """``command`` cut at the spaces a shell reads as word breaks (outside quotes,
    not escaped); each word as written."""
    out, word, quote, escaped = [], "", "", False
    for char in command:
        if escaped:
            word, escaped = word + char, False
        elif char == "\\" and quote != "'":
            word, escaped = word + char, True
        elif quote:
            word += char
            quote = "" if char == quote else quote
        elif char in "'\"":
            word, quote = word + char, char
        elif char == " ":
            if word:
                out.append(word)
            word = ""
        else:
            word += char
    return [*out, word] if word else out


def command_lines(command: str, first: str, rest: str, width: int) -> list[str]:
    """``command`` after ``first``, broken between its words to fit ``width`` with
    the shell's line continuation; a notebook line (``%``, ``!``) is kept whole."""
    if command.startswith(("%", "!")) or len(first) + len(command) <= width:
        return [first + command]
    lines, line = [], first
    for word in words(command):
        if line.strip() and len(line) + 1 + len(word) + 2 > width and line not in (first, rest):
            lines.append(line + " \\")
            line = rest + word
        else:
            line = f"{line} {word}" if line not in (first, rest) else line + word
    return [*lines, line]
