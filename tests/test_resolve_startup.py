"""What `envlock resolve` imports, and the cheap SPEC reading it relies on.

Start-up time itself is measured by bench/resolve.py, not here; these tests
pin down the reasons it is short, so that a change that brings a heavy import
back onto the resolve path fails loudly:

- the plain SPECs ("tensorflow==2.15", ">=2.14,<2.17") are read by
  envlock.versions without packaging, and give exactly the _Spec that
  packaging's Requirement and SpecifierSet give (property test); every other
  SPEC goes through packaging's Requirement;
- a resolve whose matrices come from the cache imports no TOML parser, no
  packaging at all, no typing, dataclasses or inspect, no pickle, hashlib,
  shutil, pkgutil, logging or subprocess, and none of the heavy libraries of
  other commands.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from envlock.errors import UsageError
from envlock.matrix import load
from envlock.resolve import _packaging_spec, _parse_spec, _simple_spec
from envlock.versions import Ver

# --------------------------------------------------------------- SPEC reading

NAMES = [
    "tensorflow",
    "TensorFlow",
    "TENSORFLOW",
    "tensorflow2",
    "tensor_flow",
    "tf",
    "tensorflow-gpu",
]
OPS = ["==", "!=", ">=", "<=", ">", "<", "~=", "===", "=", "=>", "~", "!"]
VERSIONS = [
    "2.15",
    "2.15.1",
    "2",
    "2.15.*",
    "2.*",
    "2.16.0rc0",
    "2.15.post1",
    "2.15+local",
    "1!2.0",
    "abc",
    "",
    "2.15.0.dev1",
    " 2.15",
    "2. 15",
]
GLUE = ["", " ", "\t", ",", " , ", ", ", ",,", ";", "[and-cuda]", "(", ")", "@", "#", "  "]

pieces = st.one_of(
    st.sampled_from(OPS),
    st.sampled_from(VERSIONS),
    st.sampled_from(GLUE),
    st.text(alphabet="0123456789.*,<>=!~ \tabcrsv+-_", max_size=6),
)
specs = st.builds(
    lambda name, rest: name + "".join(rest),
    st.sampled_from(NAMES),
    st.lists(pieces, max_size=7),
)


@pytest.mark.parametrize(
    "text",
    [
        "tensorflow",
        "tensorflow==2.15",
        "TensorFlow >= 2.14, <2.17",
        "tensorflow~=2.13.0",
        "tensorflow!=2.15.*,>=2.14",
        "tensorflow\t==2.15.1",
    ],
)
def test_plain_specs_take_the_short_way(text: str) -> None:
    simple = _simple_spec(text)
    assert simple is not None and simple.clauses is not None
    full = _packaging_spec(text, text)
    assert (simple.shown, simple.widened, simple.exact) == (full.shown, full.widened, full.exact)


@pytest.mark.parametrize(
    "text",
    [
        "tensorflow[and-cuda]==2.15",
        "tensorflow (==2.15)",
        "tensorflow==2.15; python_version > '3.9'",
        "tensorflow @ file:///tmp/x.whl",
        "tensorflow-gpu==2.15",
        "tensorflow=2.15",
        "tensorflow==2.15,,<3",
        "tensorflow==2..15",
        "tensorflow ,",
        "tensorflow==2.15,",
        "tensorflow===2.15.1",
        "tensorflow==2.16.0rc0",
        "tensorflow>=2.15.0.post1",
    ],
)
def test_other_specs_go_through_the_requirement_parser(text: str) -> None:
    assert _simple_spec(text.strip()) is None
    # and _parse_spec still reads them, or refuses them, as packaging does
    try:
        req = Requirement(text)
    except InvalidRequirement:
        with pytest.raises(UsageError, match="is not a valid requirement"):
            _parse_spec(text)
        return
    if canonicalize_name(req.name) != "tensorflow" or req.url or req.marker:
        with pytest.raises(UsageError):
            _parse_spec(text)
        return
    spec = _parse_spec(text)
    assert spec.clauses is None and spec.specifier is not None  # packaging read it
    assert spec.and_cuda == ("and-cuda" in req.extras)


MATRIX_VERSIONS = [r.version for r in load().tensorflow.releases] + [
    Ver(v) for v in ("2.15", "2.15.0.post2", "2.22.0", "3.0.0", "1.15.5", "2.9.0.post1")
]


@settings(max_examples=1500, deadline=None)
@given(specs)
def test_simple_spec_reads_as_packaging_does(text: str) -> None:
    """The short way (no packaging) gives the _Spec that packaging gives."""
    stripped = text.strip()
    simple = _simple_spec(stripped)
    if simple is None:
        return
    full = _packaging_spec(text, stripped)
    assert simple.clauses is not None and full.clauses is None
    same = ("text", "shown", "widened", "prereleases", "exact", "and_cuda")
    assert [getattr(simple, f) for f in same] == [getattr(full, f) for f in same], text
    for v in MATRIX_VERSIONS:
        assert simple.admits(v) == full.admits(v), (text, v)


def test_parse_spec_widens_the_series_and_says_so() -> None:
    spec = _parse_spec("tensorflow==2.15")
    assert spec.clauses == (("==", "2.15.*"),)  # the short way
    assert spec.shown == "==2.15.*" and spec.widened
    assert spec.exact is None and not spec.prereleases
    pinned = _parse_spec(" tensorflow==2.15.1 ")
    assert pinned.exact == Ver("2.15.1").key and pinned.text == "tensorflow==2.15.1"
    assert not pinned.widened and pinned.shown == "==2.15.1"
    ranged = _parse_spec("TensorFlow >= 2.14, <2.17")
    assert ranged.shown == "<2.17,>=2.14" and not ranged.widened
    assert [v for v in ("2.13.1", "2.14.0", "2.16.2", "2.17.0") if ranged.admits(Ver(v))] == [
        "2.14.0",
        "2.16.2",
    ]


# --------------------------------------------------------------- imports

PROBE = r"""
import contextlib, io, re, sys
before = set(sys.modules)  # re: pip's console-script wrapper imports it first
from envlock.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["resolve", "tensorflow==2.15", "--json"])
modules = sorted(set(sys.modules) - before)
import json
print(json.dumps({"code": code, "version": json.loads(out.getvalue())["version"],
                  "modules": modules}))
"""

NOT_ON_THE_RESOLVE_PATH = [
    "tomllib",  # the matrices come validated from the cache
    "hashlib",  # the cache stamp is compared, not hashed
    "pickle",  # the cache is marshal data
    "zlib",
    "packaging",  # versions and plain SPECs: envlock.versions
    "packaging.version",
    "packaging.specifiers",
    "packaging.requirements",
    "packaging.markers",
    "packaging.tags",
    "packaging.utils",
    "typing",  # envlock.record: annotations only under TYPE_CHECKING
    "argparse",  # a plain command line is read by envlock.cli.quick_parse
    "gettext",
    "locale",
    "envlock.parser",
    "json",  # envlock.output writes plain JSON itself
    "importlib",  # its package imports warnings
    "warnings",
    "dataclasses",  # envlock.record instead
    "inspect",
    "logging",
    "subprocess",
    "platform",
    "shutil",  # argparse's formatter width comes without it
    "pkgutil",  # only the named command's module is imported
    "importlib.resources",
    "importlib.util",
    "pathlib",
    "envlock.commands.lock",
    "envlock.lock",
    "envlock.render",
    "envlock.driver",
    "jinja2",
    "requests",
    "docker",
    "rich",
    "cryptography",
]


def _probe(env: dict[str, str]) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def test_a_cached_resolve_imports_only_what_it_needs(tmp_path: Path) -> None:
    env = dict(os.environ, ENVLOCK_CACHE_DIR=str(tmp_path / "cache"))
    first = _probe(env)  # parses the TOML files, writes the cache
    assert first["code"] == 0 and first["version"] == "2.15.1"
    toml = "tomllib" if sys.version_info >= (3, 11) else "tomli"
    assert toml in first["modules"]  # type: ignore[operator]
    assert list((tmp_path / "cache").glob("matrix-*.marshal"))
    second = _probe(env)
    assert second["code"] == 0 and second["version"] == "2.15.1"
    modules = set(second["modules"])  # type: ignore[call-overload]
    heavy = sorted(m for m in NOT_ON_THE_RESOLVE_PATH if m in modules)
    assert heavy == []
    # what it does need is there: the model, the matrix classes, the record
    # and version types
    assert {"envlock.model", "envlock.matrix.cuda", "envlock.record", "envlock.versions"} <= modules
    # and nothing else but envlock's own modules, __future__ and json's C speedups
    assert sorted(m for m in modules if not m.startswith("envlock")) == ["__future__", "_json"]


def test_a_changed_matrix_file_misses_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stamp holds the files' bytes: one changed byte is a miss."""
    from envlock import resolve as resolve_mod
    from envlock.matrix import load

    folder = tmp_path / "matrices"
    folder.mkdir()
    real = resolve_mod._matrix_folder()
    assert real is not None
    for name in resolve_mod.MATRIX_FILES:
        (folder / name).write_bytes((Path(real) / name).read_bytes())
    monkeypatch.setattr(resolve_mod, "_matrix_folder", lambda: str(folder))
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[int] = []

    def counting_load() -> object:
        calls.append(1)
        return load()

    monkeypatch.setattr("envlock.matrix.load", counting_load)
    resolve_mod.load_matrix()
    resolve_mod.load_matrix()
    assert len(calls) == 1  # parsed once, then read from the cache
    gpus = folder / "gpus.toml"
    gpus.write_bytes(gpus.read_bytes() + b"\n")  # same data, other bytes
    resolve_mod.load_matrix()
    assert len(calls) == 2
    assert len(list((tmp_path / "cache").glob("matrix-*.marshal"))) == 1  # rewritten in place
