"""Docs that cannot drift (issue 44): every link in the docs and every docs page
the code cites resolves; what the README, docs/contracts.md and the command
lines of the docs say about the code is checked against the code.

- Markdown: every relative link (``[text](target)`` and ``[label]: target``) in
  README.md, BENCHMARKS.md, RELIABILITY.md and docs/**/*.md names a file or
  folder of the repo, and its ``#anchor`` a heading of that page as GitHub
  renders it (lower case, punctuation but ``-`` and ``_`` dropped, spaces to
  ``-``, a repeated heading ``-1``, ``-2``...). Repo paths quoted as inline
  code (`` `docs/gpu-run-training.md` ``, `` `tests/test_lock_install*.py` ``)
  must exist too. External http(s) links are not fetched (no network) but must
  be well-formed.
- Code: every ``docs/...`` path and every ``*.md`` name in a comment,
  docstring or help text of envlock/, tests/ and scripts/ resolves from the
  repo root, unless it is another project's file, listed in EXTERNAL with the
  project the citing text names. A string that is nothing but a file name
  (``"README.md"``: a file a bundle holds) is data, not a citation.
- README: the commands it says print without ``--json`` are exactly the ones
  whose parser has no ``--json``; the report actions it lists are
  ``envlock report``'s.
- docs/contracts.md: every signature and field list in its code spans is the
  code's (``inspect.signature``, ``dataclasses.fields``); the page says how.
- Every ``envlock ...`` / ``%envlock ...`` line in a fenced block of the
  guides parses with envlock's own parser (it is not run).

No network, no venv, nothing run: in the fast tier.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import inspect
import io
import pkgutil
import re
import shlex
import tokenize
import urllib.parse
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent

MARKDOWN = sorted(
    [REPO / "README.md", REPO / "BENCHMARKS.md", REPO / "RELIABILITY.md"]
    + list((REPO / "docs").rglob("*.md"))
)
CODE = sorted(
    [p for p in (REPO / "envlock").rglob("*.py")]
    + [
        p
        for p in (REPO / "tests").rglob("*.py")
        if "fixtures" not in p.parts and p.name != "test_docs_links.py"  # its own examples
    ]
    + list((REPO / "scripts").glob("*.py"))
)

# Files of other projects the code cites by their path in that project's
# repository: (citing file, path) -> the project, which the citing file names.
EXTERNAL: dict[tuple[str, str], str] = {
    ("envlock/image/referrers.py", "specs/BUNDLE_SPEC.md"): "sigstore/cosign",
    ("envlock/image/referrers.py", "spec.md"): "opencontainers/distribution-spec",
    ("envlock/image/attestations.py", "specs/ATTESTATION_SPEC.md"): "sigstore/cosign",
    ("envlock/image/registry.py", "descriptor.md"): "OCI image spec",
    ("envlock/image/registry.py", "manifest.md"): "OCI image spec",
    ("envlock/image/registry.py", "image-index.md"): "OCI image spec",
    ("envlock/image/registry_auth.py", "docs/spec/auth/token.md"): "distribution",
    ("envlock/image/registry_auth.py", "docs/spec/auth/oauth.md"): "distribution",
}

# Top-level folders of the repo: an inline-code span starting with one of these
# is a repo path. The matrices and templates are envlock/data/'s (issue 44);
# "matrices/cuda.toml" alone is a matrix's name, as messages and locks cite it.
REPO_FOLDERS = ("docs/", "tests/", "envlock/", "scripts/", "bench/")


# --- Markdown ------------------------------------------------------------------

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^()\s>]*(?:\([^()\s]*\))?[^()\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)"
)
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)


def _without_fences(text: str) -> str:
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (github-slugger): the rendered text
    (inline code and link targets dropped, emphasis markers gone) lowered,
    every character that is not a letter, digit, space, ``-`` or ``_`` removed,
    each space a ``-``."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # [text](url) -> text
    text = text.replace("`", "")
    text = re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", text)  # emphasis markers
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = _without_fences(path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out: set[str] = set(HTML_ANCHOR.findall(text))
    for match in HEADING.finditer(text):
        base = slug(match.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def link_targets(text: str) -> list[str]:
    body = _without_fences(text)
    spans_removed = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), body)
    return INLINE_LINK.findall(spans_removed) + REF_DEF.findall(spans_removed)


def _external_ok(target: str) -> bool:
    parts = urllib.parse.urlsplit(target)
    return (
        parts.scheme in ("http", "https")
        and bool(parts.netloc)
        and " " not in target
        and "." in (parts.hostname or "")
    )


def link_problem(source: Path, target: str) -> str | None:
    """Why ``target`` (a link written in ``source``) does not resolve, or None."""
    if target.startswith(("http://", "https://")):
        return None if _external_ok(target) else "not a well-formed URL"
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):
        return None if target.startswith("mailto:") else "a scheme other than http(s) or mailto"
    path_part, _, anchor = target.partition("#")
    path_part = urllib.parse.unquote(path_part)
    if path_part.startswith("/"):
        return (
            "an absolute path (GitHub resolves it from the repo root only; write a relative link)"
        )
    file = (source.parent / path_part).resolve() if path_part else source
    try:
        file.relative_to(REPO)
    except ValueError:
        return "points outside the repo"
    if not file.exists():
        return "no such file"
    if anchor:
        if file.is_dir() or file.suffix != ".md":
            return f"#{anchor} on a file that is not a Markdown page"
        if anchor not in anchors(file):
            return f"no heading with anchor #{anchor} in {file.relative_to(REPO)}"
    return None


def code_span_paths(text: str) -> list[str]:
    body = _without_fences(text)
    out = []
    for match in CODE_SPAN.finditer(body):
        span = match.group(2).strip()
        if span.startswith(REPO_FOLDERS) and re.fullmatch(r"[\w./*-]+", span):
            out.append(span.rstrip("."))
    return out


def _exists(path: str) -> bool:
    if any(c in path for c in "*?["):
        return any(REPO.glob(path))
    return (REPO / path).exists()


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


@pytest.mark.parametrize("page", MARKDOWN, ids=_rel)
def test_every_relative_link_resolves(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    broken = [f"{t}: {why}" for t in link_targets(text) if (why := link_problem(page, t))]
    assert broken == [], f"{_rel(page)}: broken links:\n" + "\n".join(broken)


@pytest.mark.parametrize("page", MARKDOWN, ids=_rel)
def test_every_repo_path_in_inline_code_exists(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    missing = [p for p in code_span_paths(text) if not _exists(p)]
    assert missing == [], f"{_rel(page)} cites paths the repo does not have: {missing}"


# --- Code ------------------------------------------------------------------------

URL = re.compile(r"https?://\S+")
CITATION = re.compile(r"(?<![\w/.-])((?:docs/[\w./-]*[\w/])|(?:[\w./-]+\.md))(?![\w-])")


def prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and every string of the file that is
    prose: a string that is a bare file name is data (a file a bundle holds)."""
    out = []
    source = path.read_text(encoding="utf-8")
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string))
        elif tok.type == tokenize.STRING or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            body = tok.string.strip("rbufRBUF").strip("'\"")
            if re.fullmatch(r"[\w./{}-]+", body) and "/" not in body.strip("/"):
                continue  # "README.md", "lock.md": a file name as data
            out.append((tok.start[0], tok.string))
    return out


def citations(path: Path) -> list[tuple[int, str]]:
    out = []
    for first, text in prose(path):
        text = URL.sub(lambda m: " " * len(m.group(0)), text)
        for match in CITATION.finditer(text):
            line = first + text.count("\n", 0, match.start())
            out.append((line, match.group(1).rstrip(".")))
    return out


def test_every_docs_page_the_code_cites_exists() -> None:
    broken = []
    for path in CODE:
        for line, cited in citations(path):
            if (_rel(path), cited) in EXTERNAL:
                continue
            if not _exists(cited):
                broken.append(f"{_rel(path)}:{line}: {cited}")
    assert broken == [], "code cites pages the repo does not have:\n" + "\n".join(broken)


def test_each_external_citation_is_still_made_and_names_its_project() -> None:
    """The exceptions are no wider than the code: each is cited where listed,
    the citing file names the project, and the path is not one of the repo's."""
    for (file, cited), project in EXTERNAL.items():
        path = REPO / file
        assert cited in [c for _, c in citations(path)], f"{file} no longer cites {cited}"
        assert project in path.read_text(encoding="utf-8"), f"{file} does not name {project}"
        assert not (REPO / cited).exists(), f"{cited} is a repo file: take it out of EXTERNAL"


# --- The checks themselves -----------------------------------------------------


def test_slugs_are_githubs() -> None:
    assert slug("Fast tier") == "fast-tier"
    assert slug("`envlock lock --check DIR`: the gate") == "envlock-lock---check-dir-the-gate"
    assert slug("Reports and SBOMs in the registry") == "reports-and-sboms-in-the-registry"
    assert slug("After a platform upgrade (Colab, 2026)") == "after-a-platform-upgrade-colab-2026"
    assert slug("snake_case *emphasis*") == "snake_case-emphasis"


def test_a_broken_link_and_anchor_are_found(tmp_path: Path) -> None:
    page = REPO / "docs" / "README.md"
    assert link_problem(page, "flow.md") is None
    assert link_problem(page, "nope.md") == "no such file"
    assert link_problem(page, "../BENCHMARKS.md#no-such-heading") == (
        "no heading with anchor #no-such-heading in BENCHMARKS.md"
    )
    assert link_problem(page, "https://example.org/a b") == "not a well-formed URL"
    assert link_problem(page, "../../etc/passwd") == "points outside the repo"
    assert link_targets("see [a](x.md#y) and `[b](z.md)` and\n```\n[c](w.md)\n```\n") == ["x.md#y"]


def test_a_cited_page_is_found_in_comments_and_docstrings_not_in_data(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""See docs/nope.md, and https://example.org/docs/x.md."""\n'
        "# design.md, 'Layout'\n"
        'NAMES = ["README.md", "lock.md"]\n'
        'HELP = "the page (docs/report-format.md)."\n',
        encoding="utf-8",
    )
    assert citations(sample) == [
        (1, "docs/nope.md"),
        (2, "design.md"),
        (4, "docs/report-format.md"),
    ]


# --- The README's claims about the commands ------------------------------------


def leaf_parsers() -> dict[str, argparse.ArgumentParser]:
    """{"ci matrix": its parser, ...}: every command envlock runs, as the
    parser builds them (an alias listed once, under its first name)."""
    from envlock.parser import build_parser

    out: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            out[" ".join(path)] = parser
            return
        seen: set[int] = set()
        for name, child in subs[0].choices.items():
            if id(child) not in seen:
                seen.add(id(child))
                walk(child, (*path, name))

    walk(build_parser(), ())
    return out


def _flags(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {flag: a for a in parser._actions for flag in a.option_strings}


def _paragraph(text: str, start: str) -> str:
    at = text.index(start)
    end = text.find("\n\n", at)
    return text[at : end if end >= 0 else len(text)]


README_JSON = "Every command takes `--json`"


def test_the_readme_names_exactly_the_commands_without_json() -> None:
    """README: every command takes --json except the ones it names. Adding
    --json to one of them (or a command without it) fails here until the
    README's list says so."""
    paragraph = _paragraph((REPO / "README.md").read_text(encoding="utf-8"), README_JSON)
    named = set(re.findall(r"`envlock ([a-z][a-z ]*[a-z])`", " ".join(paragraph.split())))
    parsers = leaf_parsers()
    without = {name for name, p in parsers.items() if "--json" not in _flags(p)}
    assert named == without, (
        f"README.md ({README_JSON!r}) names {sorted(named)}; "
        f"the commands without --json are {sorted(without)}"
    )
    assert len(parsers) > len(without)  # the rule is "every command", the list its exceptions


def test_the_readme_says_why_ci_matrix_needs_no_json() -> None:
    """The README's reason for `ci matrix`: its output is JSON in every shape,
    a list by default."""
    fmt = _flags(leaf_parsers()["ci matrix"])["--format"]
    assert fmt.default == "json"
    assert set(fmt.choices or ()) == {"json", "github", "bake"}
    paragraph = " ".join(
        _paragraph((REPO / "README.md").read_text(encoding="utf-8"), README_JSON).split()
    )
    assert "`--format github` and `--format bake` are the other shapes" in paragraph


def test_the_readme_lists_every_report_action() -> None:
    text = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    listed = re.search(r"lives under `envlock report` \(([a-z, ]+)\)", text)
    assert listed is not None
    actions = {name.split()[1] for name in leaf_parsers() if name.startswith("report ")}
    assert set(listed.group(1).split(", ")) == actions


# --- docs/contracts.md against the code ----------------------------------------

CONTRACTS = REPO / "docs" / "contracts.md"
IDENT = re.compile(r"[A-Za-z_][\w.]*\(")


def envlock_modules() -> dict[str, ModuleType]:
    """Every module of the package, imported (``__main__`` runs the command line)."""
    import envlock

    out = {}
    for info in pkgutil.walk_packages(envlock.__path__, "envlock."):
        if not info.name.endswith("__main__"):
            out[info.name] = importlib.import_module(info.name)
    return out


def _split_top(text: str) -> list[str]:
    """``a, b=(1, 2), c`` -> ["a", "b=(1, 2)", "c"]: commas outside brackets and quotes."""
    parts, depth, quote, cur = [], 0, "", ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def calls(span: str) -> list[tuple[str, list[str]]]:
    """Every ``name(a, b, ...)`` in a code span, nested ones too."""
    out = []
    for match in IDENT.finditer(span):
        depth, end = 0, match.end() - 1
        for end in range(match.end() - 1, len(span)):
            depth += {"(": 1, ")": -1}.get(span[end], 0)
            if depth == 0:
                break
        if depth == 0:
            out.append((match.group(0)[:-1], _split_top(span[match.end() : end])))
    return out


def described(text: str) -> list[tuple[str | None, str, list[str]]]:
    """(the row's module or None, name, listed arguments) for every call with
    arguments in a code span of contracts.md; a row of a table whose first cell
    is a module (`` `envlock.x` ``) sets where its names are looked up first."""
    out = []
    pieces = []  # a table row, or a paragraph (a span may run over a line break)
    for block in _without_fences(text).split("\n\n"):
        rows = block.strip().splitlines()
        pieces += rows if rows and rows[0].startswith("|") else [" ".join(rows)]
    for piece in pieces:
        row = re.match(r"^\|\s*`(envlock(?:\.\w+)*)`", piece)
        module = row.group(1) if row else None
        for span in CODE_SPAN.findall(piece):
            for name, args in calls(span[1].replace("\\|", "|")):
                if args:  # `lock()`, `.to_dict()`: a mention, not a signature
                    out.append((module, name, args))
    return out


def resolve_name(name: str, module: str | None, modules: dict[str, ModuleType]) -> object:
    """The object ``name`` means in contracts.md: a dotted path from the row's
    module, from ``envlock``, or from any module; a bare name of the row's module,
    else the one object of that name in the package."""
    heads = [module] if module else []
    heads += ["envlock", *modules]
    for head in heads:
        obj: object = modules.get(head) if head in modules else None
        if obj is None and head == "envlock":
            obj = importlib.import_module("envlock")
        parts = name.split(".")
        if name.startswith("envlock."):
            obj, parts = importlib.import_module("envlock"), parts[1:]
        for part in parts:
            sub = f"{getattr(obj, '__name__', '')}.{part}"
            found = getattr(obj, part, None)
            obj = modules.get(sub) if found is None else found
            if obj is None:
                break
        if obj is not None:
            return obj
    return None


def _param_names(obj: object) -> list[tuple[str, bool, bool]] | None:
    """(name, keyword only, has a default) of each field or parameter, or None
    when ``obj`` is neither a record nor callable."""
    if dataclasses.is_dataclass(obj) and isinstance(obj, type):
        return [
            (
                f.name,
                f.kw_only is True,
                f.default is not dataclasses.MISSING
                or f.default_factory is not dataclasses.MISSING,
            )
            for f in dataclasses.fields(obj)
        ]
    if isinstance(obj, type) and hasattr(obj, "_fields"):  # NamedTuple
        defaults = getattr(obj, "_field_defaults", {})
        return [(n, False, n in defaults) for n in obj._fields]
    if isinstance(obj, type) and hasattr(obj, "__annotations__") and hasattr(obj, "__total__"):
        return [(n, False, True) for n in obj.__annotations__]  # TypedDict
    if callable(obj):
        try:
            sig = inspect.signature(obj)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
        return [
            (p.name, p.kind is p.KEYWORD_ONLY, p.default is not p.empty)
            for p in sig.parameters.values()
            if p.name not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
    return None


def mismatch(obj: object, args: list[str]) -> str | None:
    """Why ``args`` (as contracts.md lists them) do not describe ``obj``'s
    fields or parameters, or None. Each listed name is a field or parameter, in
    their order; a listed type or value (``LockRequest``, ``str | ImageRef``)
    stands for the next positional one; ``*`` starts the keyword-only ones;
    ``...`` stands for any number left out; without ``...`` none is left out;
    ``name(kw=)`` names one keyword of ``name`` and says nothing of the others."""
    params = _param_names(obj)
    if params is None:
        return "neither a record nor callable"
    names = [p[0] for p in params]
    at, keyword, gap = 0, False, False
    for arg in args:
        if arg == "...":
            gap = True
            continue
        if re.fullmatch(r"[a-z_][a-z0-9_]*=", arg):  # build_image(tag=): that one named
            if arg[:-1] not in names:
                return f"{arg[:-1]!r} is not one of {names}"
            at, gap = names.index(arg[:-1]) + 1, True
            continue
        if arg == "*":
            keyword = True
            continue
        head = re.match(r"^\*{0,2}([a-z_][a-z0-9_]*)\s*(?:[:=]|$)", arg)
        if head is None or head.group(1) not in names:
            if head is not None:
                return f"{head.group(1)!r} is not one of {names}"
            if at >= len(params) or params[at][1]:
                return f"{arg!r} stands for no positional parameter of {names}"
            at += 1
            continue
        found = names.index(head.group(1), 0)
        if found < at:
            return f"{head.group(1)!r} out of order: {names}"
        if found > at and not gap:
            return f"leaves out {names[at:found]} (write ... where some are left out)"
        if keyword and not params[found][1]:
            return f"{head.group(1)!r} is listed after * but is not keyword-only"
        if not keyword and params[found][1]:
            return f"{head.group(1)!r} is keyword-only: write * before it"
        at, gap = found + 1, False
    if at < len(params) and not gap:
        return f"leaves out {names[at:]} (write ... where some are left out)"
    return None


def test_every_signature_and_field_list_in_contracts_is_the_codes() -> None:
    modules = envlock_modules()
    wrong = []
    for module, name, args in described(CONTRACTS.read_text(encoding="utf-8")):
        obj = resolve_name(name, module, modules)
        if obj is None:
            wrong.append(f"{name}: nothing of that name ({module or 'envlock'})")
            continue
        why = mismatch(obj, args)
        if why:
            wrong.append(f"{name}({', '.join(args)}): {why}")
    assert wrong == [], "docs/contracts.md differs from the code:\n" + "\n".join(wrong)


def test_every_module_contracts_names_exists() -> None:
    modules = envlock_modules()
    text = CONTRACTS.read_text(encoding="utf-8")
    rows = re.findall(r"^\|\s*`(envlock(?:\.\w+)*)`", text, re.M)
    assert "envlock.bundle.folder" in rows
    missing = [name for name in rows if name not in modules]
    assert missing == [], f"docs/contracts.md has rows for modules that do not exist: {missing}"


def test_the_contracts_check_finds_a_left_out_field_and_a_renamed_parameter() -> None:
    from envlock.bundle.folder import LockedFolder, render_folder

    assert mismatch(LockedFolder, ["lock", "folder", "files", "digest"]) == (
        "leaves out ['notes'] (write ... where some are left out)"
    )
    assert mismatch(LockedFolder, ["lock", "folder", "..."]) is None
    assert mismatch(render_folder, ["dir", "given: RenderOptions"]) == (
        "'dir' is not one of ['folder', 'given', 'force']"
    )
    assert mismatch(render_folder, ["Path", "given", "*", "force=False"]) is None
    assert mismatch(render_folder, ["folder", "*", "given"]) == (
        "'given' is listed after * but is not keyword-only"
    )
    assert mismatch(render_folder, ["folder", "given", "force"]) == (
        "'force' is keyword-only: write * before it"
    )
    assert described("| `envlock.x` | `f(a, b)` |\n\nsee `g(c,\nd)`") == [
        ("envlock.x", "f", ["a", "b"]),
        (None, "g", ["c", "d"]),
    ]


# --- Every envlock command line in the docs parses -------------------------------

FENCED = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1", re.M | re.S)
COMMAND = re.compile(r"^(%envlock|envlock|\./envlock\.sh|~/\.envlock/bin/envlock)\s+(.*)$")
SHELL_OPERATORS = {"|", "||", "&&", ";", ">", ">>", "2>", "2>&1", "<", "&"}


def documented_commands(text: str) -> list[tuple[str, list[str]]]:
    """(the line as written, envlock's argv) of every envlock command in a fenced
    block: continuation lines joined, comments and what follows a shell
    operator (``>> "$GITHUB_STEP_SUMMARY"``) dropped; a ``%envlock`` line gets
    what the magic adds (``envlock.notebook.with_target``: the kernel's
    interpreter)."""
    from envlock.notebook import with_target

    out = []
    for _, block in FENCED.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            match = COMMAND.match(line.strip())
            if match is None:
                continue
            words = shlex.split(match.group(2), comments=True)
            for at, word in enumerate(words):
                if word in SHELL_OPERATORS:
                    words = words[:at]
                    break
            if match.group(1) == "%envlock":
                words = with_target(words, "/opt/kernel/bin/python")
            out.append((line.strip(), words))
    return out


def parse_error(argv: list[str]) -> str | None:
    """argparse's complaint about ``argv`` to envlock, or None when it parses."""
    from envlock.parser import build_parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as e:
        if e.code not in (0, None):
            return " ".join(err.getvalue().split()) or f"exit {e.code}"
    return None


GUIDES = [p for p in MARKDOWN if "reference" not in p.parts]  # reference/: generated


@pytest.mark.parametrize("page", GUIDES, ids=_rel)
def test_every_envlock_command_in_the_docs_parses(page: Path) -> None:
    """Each command line a page shows is one envlock accepts (its options exist,
    take the values shown, and the required ones are there); it is not run."""
    wrong = [
        f"{line}\n  -> {why}"
        for line, argv in documented_commands(page.read_text(encoding="utf-8"))
        if (why := parse_error(argv))
    ]
    assert wrong == [], f"{_rel(page)}: commands envlock would refuse:\n" + "\n".join(wrong)


def test_the_command_check_sees_a_wrong_option_and_the_magics_venv() -> None:
    text = "```sh\nenvlock lock tensorflow==2.15 \\\n  --no-such-flag -o env/  # x\n```\n"
    [(line, argv)] = documented_commands(text)
    assert argv == ["lock", "tensorflow==2.15", "--no-such-flag", "-o", "env/"]
    assert "unrecognized arguments: --no-such-flag" in (parse_error(argv) or "")
    [(_, argv)] = documented_commands("```python\n%envlock capture -o ~/env\n```\n")
    assert argv == ["capture", "--venv", "/opt/kernel/bin/python", "-o", "~/env"]
    assert parse_error(argv) is None
    assert "--venv" in (parse_error(["capture", "-o", "~/env"]) or "")


PAGE_JSON = "Every command on this page has `--json`"


def command_name(argv: list[str]) -> str:
    """``["report", "verify", "X", ...]`` -> "report verify": the command an argv runs."""
    leaves = leaf_parsers()
    for n in (2, 1):
        if " ".join(argv[:n]) in leaves:
            return " ".join(argv[:n])
    raise AssertionError(f"no envlock command in {argv}")


@pytest.mark.parametrize("page", GUIDES, ids=_rel)
def test_a_page_that_says_every_command_has_json_shows_only_such_commands(page: Path) -> None:
    """The README's rule has exceptions; a page may say "every command" only of
    its own, and then each command it shows has --json. The unqualified claim
    is the README's to make, with its list."""
    text = page.read_text(encoding="utf-8")
    flat = " ".join(text.split())
    assert "Every command has `--json`" not in flat, (
        f"{_rel(page)}: say which (README.md lists the commands without --json)"
    )
    if PAGE_JSON not in flat:
        return
    leaves = leaf_parsers()
    shown = {command_name(argv) for _, argv in documented_commands(text)}
    assert shown, f"{_rel(page)} says {PAGE_JSON!r} and shows no command"
    without = sorted(name for name in shown if "--json" not in _flags(leaves[name]))
    assert without == [], f"{_rel(page)} says {PAGE_JSON!r}; these have none: {without}"
