"""Fuzzing every user input of resolve, lock, render and the matrix files.

Shared by tests/test_fuzz_inputs.py (a few hundred examples per kind) and
bench/fuzz.py (10,000 or more per kind). Each kind is a hypothesis strategy
and a function that feeds one example through the entry point the command
line uses (``envlock.cli.main``, or the parser ``envlock.matrix`` calls for a
matrix file) and returns an ``Outcome``. stdout is strict UTF-8 and stderr
backslash-escapes, as for a real process, so text the terminal cannot take is
found too. ``check`` says what is wrong with an outcome: an exception that
escaped, an exit code outside {0, 1, 2}, an exit 2 without a message.

``envlock lock`` runs with the resolver replaced by a fake that returns a
recorded lock for the resolution (no network, no uv): what is fuzzed is the
flags, the -r files and the rendering, not the resolver.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import shutil
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

REPO = Path(__file__).resolve().parent.parent
GOLDEN_BUNDLE = REPO / "tests" / "golden" / "render" / "tf2.15-system"


def scaled(examples: int) -> int:
    """A fuzz test's example count times ENVLOCK_FUZZ_SHARE (default 1). The
    unit runs under the other CPythons (tests/pythons.sh) take a quarter: the
    code under test is the same there, and the full draws run under the main
    interpreter; at least 25 examples either way."""
    share = float(os.environ.get("ENVLOCK_FUZZ_SHARE", "1"))
    return max(25, round(examples * share))


# --------------------------------------------------------------------- running


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str
    crash: str = ""  # the traceback of an exception that escaped main()


def run_cli(argv: list[str]) -> Outcome:
    """``envlock.cli.main(argv)`` with stdout and stderr captured as a process has them."""
    from envlock.cli import main

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    crash = ""
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse: a bad flag is exit 2 with its usage line
            code = e.code if isinstance(e.code, int) else 2
        except BaseException:  # noqa: BLE001 - this is what fuzzing looks for
            code = -1
            crash = traceback.format_exc()
        try:
            out.flush()
            err.flush()
        except UnicodeEncodeError:  # text stdout could not take: a crash in a real process
            code, crash = -1, traceback.format_exc()
    return Outcome(code, _text(out), _text(err), crash)


def _text(stream: io.TextIOWrapper) -> str:
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8", "replace")


def run_call(call: Callable[[], object]) -> Outcome:
    """A library entry point: an EnvlockError is its exit code and message."""
    from envlock.errors import EnvlockError

    try:
        call()
    except EnvlockError as e:
        return Outcome(e.exit_code, "", f"envlock: error: {e.message}\n")
    except BaseException:  # noqa: BLE001
        return Outcome(-1, "", "", traceback.format_exc())
    return Outcome(0, "", "")


def check(outcome: Outcome) -> str | None:
    """What is wrong with an outcome, or None."""
    if outcome.crash:
        return "an exception escaped:\n" + outcome.crash
    if outcome.code not in (0, 1, 2):
        return f"exit {outcome.code}:\n{outcome.err}"
    if "Traceback" in outcome.err:
        return "a traceback on stderr:\n" + outcome.err
    if outcome.code == 2 and not outcome.err.strip():
        return "exit 2 without a message"
    return None


# ------------------------------------------------------------------ strategies

# any code point, lone surrogates included (argv can hold them: surrogateescape)
ANY_CHAR = st.characters(exclude_categories=())
ANY_TEXT = st.text(ANY_CHAR, max_size=40)
PRINTABLE = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=30)

NUMBER = st.one_of(
    st.integers(0, 30).map(str),
    st.integers(0, 10**30).map(str),
    st.integers(1, 6000).map(lambda n: "9" * n),
    st.sampled_from(
        ["0", "00", "01", "1e400", "-1", "1_0", "\u0661", "\uff11", "1.0e5", "9" * 4400]
    ),
)


@st.composite
def version_text(draw: st.DrawFn) -> str:
    epoch = draw(st.sampled_from(["", "", "", "0!", "1!", "9999999999!"]))
    parts = draw(st.lists(NUMBER, min_size=1, max_size=4))
    tail = draw(
        st.sampled_from(["", "", "", "rc1", "a0", ".dev0", ".post1", "-1", ".*", "b", "  "])
    )
    local = draw(st.sampled_from(["", "", "", "+cpu", "+1.2.abc", "+"]))
    return epoch + ".".join(parts) + tail + local + draw(st.sampled_from(["", "", ".*"]))


OPERATORS = ["==", "!=", ">=", "<=", ">", "<", "~=", "===", "=", "", " == ", "=>", "!"]
GOOD_SPECS = [
    "tensorflow",
    "tensorflow==2.15",
    "tensorflow[and-cuda]==2.15",
    "tensorflow>=2.14,<2.17",
    "tensorflow~=2.13.0",
    "tensorflow==2.15.1",
]


@st.composite
def spec_text(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return draw(ANY_TEXT)
    if kind == 1:  # a good SPEC with something inserted
        good = draw(st.sampled_from(GOOD_SPECS))
        at = draw(st.integers(0, len(good)))
        return good[:at] + draw(ANY_TEXT.filter(bool)) + good[at:]
    name = draw(
        st.sampled_from(["tensorflow", "TensorFlow", "tensorflow-gpu", "tf", "tensorflow "])
    )
    extras = draw(st.sampled_from(["", "", "[and-cuda]", "[AND_CUDA]", "[x]", "[]", "[and-cuda"]))
    clauses = draw(
        st.lists(
            st.tuples(st.sampled_from(OPERATORS), version_text()).map("".join),
            max_size=3,
        )
    )
    marker = draw(st.sampled_from(["", "", "", "; python_version > '3'", " @ file:///x.whl"]))
    return name + extras + ",".join(clauses) + marker


def flag_value(good: list[str]) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(good), version_text(), ANY_TEXT, PRINTABLE)


RESOLVE_FLAGS: dict[str, list[str]] = {
    "--python": ["3.11", "3.9", "3.8", "3.13", "2.7", "3"],
    "--cuda": ["12.2", "12", "11.8", "99.9"],
    "--cudnn": ["8.9", "8", "9.3"],
    "--driver": ["535.104.05", "450.80.02", "999", "1e400"],
    "--os": ["ubuntu22.04", "ubuntu20.04", "ubuntu24.04", "ubuntu99.99"],
    "--cuda-source": ["system", "pip", "conda"],
    "--gpu": ["9.0", "NVIDIA H100 PCIe", "Tesla K80", "3.5", "99.9"],
}
RENDER_FLAGS: dict[str, list[str]] = {
    "--base-image": [
        "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04",
        "registry.example:5000/cuda:12.2",
        "ubuntu",
        "a b",
    ],
    "--base-digest": ["sha256:" + "0" * 64, "sha256:" + "A" * 64, "sha256:1234", "md5:00"],
    "--python-from": ["image", "apt", "uv", "conda"],
}


@st.composite
def flags(draw: st.DrawFn, table: dict[str, list[str]]) -> list[str]:
    argv: list[str] = []
    for flag in draw(st.lists(st.sampled_from(sorted(table)), max_size=4)):
        value = draw(flag_value(table[flag]))
        if value.strip().lower() == "auto":  # --driver auto reads this machine
            value = "535"
        argv.append(f"{flag}={value}")
    return argv


@st.composite
def resolve_argv(draw: st.DrawFn) -> list[str]:
    spec = draw(st.one_of(st.sampled_from(GOOD_SPECS), spec_text()))
    json_flag = draw(st.sampled_from([[], ["--json"]]))
    return (
        ["resolve", "--", spec]
        if spec.startswith("-")
        else [
            "resolve",
            *draw(flags(RESOLVE_FLAGS)),
            *json_flag,
            spec,
        ]
    )


def file_content() -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.binary(max_size=60),
        ANY_TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")),
        st.lists(
            st.one_of(
                st.tuples(
                    st.sampled_from(["numpy", "six", "tensorflow", "-e", "--hash"]),
                    st.sampled_from(OPERATORS),
                    version_text(),
                ).map("".join),
                PRINTABLE,
            ),
            max_size=4,
        ).map(lambda lines: "\n".join(lines).encode("utf-8")),
    )


@dataclass(frozen=True)
class LockExample:
    argv: list[str]  # after the output folder; "{req}" is the -r file
    requirement_file: bytes | None


@st.composite
def lock_example(draw: st.DrawFn) -> LockExample:
    spec = draw(st.one_of(st.sampled_from(GOOD_SPECS[:3]), spec_text()))
    argv = [*draw(flags(RESOLVE_FLAGS)), *draw(flags(RENDER_FLAGS))]
    for _ in range(draw(st.integers(0, 2))):
        value = draw(
            st.one_of(
                st.tuples(
                    st.sampled_from(["numpy", "six", "tensorflow", "x y"]),
                    st.sampled_from(OPERATORS),
                    version_text(),
                ).map("".join),
                ANY_TEXT,
            )
        )
        argv.append(f"--with={value}")
    if draw(st.booleans()):
        argv.append(f"--index-url={draw(st.one_of(ANY_TEXT, st.sampled_from(INDEX_URLS)))}")
    if draw(st.booleans()):
        argv.append(f"--resolver={draw(st.sampled_from(['uv', 'pip', 'conda']))}")
    requirement_file = draw(st.one_of(st.none(), file_content()))
    if requirement_file is not None:
        argv += ["-r", "{req}"]
    argv.append("--json" if draw(st.booleans()) else "--offline")
    return LockExample([*argv, "--", spec], requirement_file)


INDEX_URLS = [
    "https://user:secret@index.example/simple",
    "http://127.0.0.1:1/simple",
    "file:///tmp/simple",
    "https://index.example/simple\n-r x",
]


@dataclass(frozen=True)
class RenderExample:
    argv: list[str]
    ca_cert: bytes | None


@st.composite
def render_example(draw: st.DrawFn) -> RenderExample:
    argv = draw(flags({**RENDER_FLAGS, "--os": RESOLVE_FLAGS["--os"]}))
    ca = draw(st.one_of(st.none(), st.none(), file_content(), st.just(PEM)))
    if ca is not None:
        argv.append("--ca-cert={ca}")
    elif draw(st.booleans()):
        odd = draw(st.sampled_from(["missing.pem", ".", "", "a\nb"]))
        argv.append(f"--ca-cert={odd}")
    argv.append(draw(st.sampled_from(["--json", "--os=ubuntu22.04", "--python-from=uv"])))
    return RenderExample(argv, ca)


PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

# JSON values: what json.dumps writes, and raw text it never writes
JSON_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    ANY_TEXT,
)
JSON_VALUE = st.recursive(
    JSON_SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(ANY_TEXT, inner, max_size=3)
    ),
    max_leaves=8,
)
RAW_JSON_TOKENS = [
    "9" * 5000,
    "1e400",
    "NaN",
    "-Infinity",
    '"\\ud800"',
    "[" * 3000,
    '{"a": 1, "a": 2}',
    "\ufeff{}",
    "",
    "{",
]


@st.composite
def json_document(draw: st.DrawFn, base: dict[str, Any]) -> bytes:
    """A document near ``base`` (a valid one): keys changed, dropped, added, or
    raw text JSON never holds; sometimes plain bytes."""
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return draw(st.binary(max_size=80))
    if kind == 4:  # any JSON document, an object or not
        return json.dumps(draw(JSON_VALUE)).encode("utf-8", "surrogatepass")
    doc: dict[str, Any] = dict(base)
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.one_of(st.sampled_from(sorted(base)), ANY_TEXT))
        if draw(st.integers(0, 4)) == 0:
            doc.pop(key, None)
        else:
            doc[key] = draw(JSON_VALUE)
    text = json.dumps(doc, ensure_ascii=draw(st.booleans()))
    if kind == 1:  # a raw token in place of one value
        token = draw(st.sampled_from(RAW_JSON_TOKENS))
        key = json.dumps(draw(st.sampled_from(sorted(base))))
        text = text.replace(key + ": ", key + ": " + token + ", " + key + "_x: ", 1)
    return text.encode("utf-8", "surrogatepass")


RUNTIME_BASE: dict[str, Any] = {
    "schema": "envlock.runtime/v1",
    "visible_devices": None,
    "memory_growth": True,
    "mixed_precision": "float32",
    "determinism": False,
    "seed": 42,
}
RENDER_BASE: dict[str, Any] = {
    "schema": "envlock.render/v1",
    "base_image": None,
    "base_digest": None,
    "os": None,
    "ca_cert": None,
    "python_from": None,
}


# matrix documents: the real ones, mutated

TOML_VALUE = st.recursive(
    st.one_of(
        st.booleans(),
        st.integers(-(10**40), 10**40),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(ANY_CHAR.filter(lambda c: not 0xD800 <= ord(c) <= 0xDFFF), max_size=20),
        st.sampled_from(["12.2", "3.11", "2.15.1", "8.9", "sm_90", "system", "X.Y", "1!2.0"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield (*prefix, i)
            yield from _paths(value, (*prefix, i))


@st.composite
def matrix_document(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(["tensorflow.toml", "cuda.toml", "gpus.toml"]))
    doc = copy.deepcopy(_matrix_docs()[name])
    if name == "tensorflow.toml":  # a few rows: the parser's work grows with them
        start = draw(st.integers(0, len(doc["releases"]) - 1))
        doc["releases"] = doc["releases"][start : start + draw(st.integers(1, 4))]
    # none to four edits: with none the document parses (exit 0), so a short run
    # (a quarter of the draws, tests/pythons.sh) still reaches the inputs that work;
    # with one to four, 75 draws once all ended in exit 2
    for _ in range(draw(st.integers(0, 4))):
        paths = list(_paths(doc))
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        action = draw(st.integers(0, 3))
        if action == 0:
            del parent[path[-1]]
        elif action == 1 and isinstance(parent, dict):
            parent[draw(st.text(max_size=8))] = draw(TOML_VALUE)
        else:
            parent[path[-1]] = draw(TOML_VALUE)
    return name, doc


_DOCS: dict[str, dict[str, Any]] = {}


def _matrix_docs() -> dict[str, dict[str, Any]]:
    if not _DOCS:
        from envlock.matrix import read_toml

        for name in ("tensorflow.toml", "cuda.toml", "gpus.toml"):
            _DOCS[name] = read_toml(name)[0]
    return _DOCS


def parse_matrix(name: str, doc: dict[str, Any]) -> Outcome:
    """The parser ``envlock.matrix.load_*`` calls for the file."""
    from envlock.matrix import cuda, gpus, tensorflow

    parsers: dict[str, Callable[[], object]] = {
        "tensorflow.toml": lambda: tensorflow.parse(doc, "tensorflow.toml", digest="0" * 64),
        "cuda.toml": lambda: cuda.parse(doc, "cuda.toml"),
        "gpus.toml": lambda: gpus.parse(doc, "gpus.toml"),
    }
    return run_call(parsers[name])


@st.composite
def matrix_text(draw: st.DrawFn) -> bytes:
    """A whole tensorflow.toml as a user passes it to `envlock matrix show --matrix`."""
    kind = draw(st.integers(0, 2))
    if kind == 0:
        return draw(st.binary(max_size=80))
    if kind == 1:
        value = draw(st.sampled_from(["1" * 5000, "[" * 3000, "nan", "'\\ud800'", "1979-05-27"]))
        return f"schema_version = {value}\n".encode()
    return draw(ANY_TEXT).encode("utf-8", "surrogatepass")


# ------------------------------------------------------------------ the kinds


class Workspace:
    """A folder for one kind's examples: a bundle to render, files to pass."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bundle = root / "bundle"
        self.count = 0

    def fresh_bundle(self) -> Path:
        if self.bundle.exists():
            shutil.rmtree(self.bundle)
        self.bundle.mkdir(parents=True)
        for name in ("pylock.toml", "requirements.txt"):
            shutil.copy(GOLDEN_BUNDLE / name, self.bundle / name)
        return self.bundle

    def file(self, name: str, data: bytes) -> Path:
        path = self.root / name
        path.write_bytes(data)
        return path


def kind_spec(ws: Workspace, spec: str) -> Outcome:
    return run_cli(["resolve", "--json", "--", spec])


def kind_resolve_flags(ws: Workspace, argv: list[str]) -> Outcome:
    return run_cli(argv)


@contextlib.contextmanager
def fake_resolver() -> Iterator[None]:
    """``envlock lock`` with the resolver replaced: a recorded lock for any resolution."""
    from envlock.bundle import folder
    from envlock.lock.pylock import read_lock

    recorded = read_lock(GOLDEN_BUNDLE)

    def fake_lock(resolution: Any, lock_input: Any, **_: Any) -> Any:
        return replace(recorded, resolution=resolution, input=lock_input)

    saved = folder.lock, folder._prewarm
    folder.lock = fake_lock  # type: ignore[assignment]
    folder._prewarm = lambda *a: None  # type: ignore[assignment]
    try:
        yield
    finally:
        folder.lock, folder._prewarm = saved  # type: ignore[assignment]


def kind_lock_flags(ws: Workspace, example: LockExample) -> Outcome:
    out = ws.root / "out"
    if out.exists():
        shutil.rmtree(out)
    argv = list(example.argv)
    if example.requirement_file is not None:
        req = ws.file("req.txt", example.requirement_file)
        argv = [str(req) if a == "{req}" else a for a in argv]
    with fake_resolver():
        return run_cli(["lock", "-o", str(out), *argv])


def kind_render_flags(ws: Workspace, example: RenderExample) -> Outcome:
    bundle = ws.fresh_bundle()
    argv = list(example.argv)
    if example.ca_cert is not None:
        ca = ws.file("ca.pem", example.ca_cert)
        argv = [a.replace("{ca}", str(ca)) for a in argv]
    return run_cli(["render", str(bundle), *argv])


def kind_bundle_json(name: str) -> Callable[[Workspace, bytes], Outcome]:
    def run(ws: Workspace, data: bytes) -> Outcome:
        bundle = ws.fresh_bundle()
        (bundle / name).write_bytes(data)
        return run_cli(["render", str(bundle)])

    return run


def kind_matrix_doc(ws: Workspace, example: tuple[str, dict[str, Any]]) -> Outcome:
    return parse_matrix(*example)


def kind_matrix_file(ws: Workspace, data: bytes) -> Outcome:
    path = ws.file("tensorflow.toml", data)
    return run_cli(["matrix", "show", "--json", "--matrix", str(path)])


@dataclass(frozen=True)
class Kind:
    name: str
    strategy: st.SearchStrategy[Any]
    run: Callable[[Workspace, Any], Outcome]


KINDS: tuple[Kind, ...] = (
    Kind("spec", spec_text(), kind_spec),
    Kind("resolve-flags", resolve_argv(), kind_resolve_flags),
    Kind("lock-flags", lock_example(), kind_lock_flags),
    Kind("render-flags", render_example(), kind_render_flags),
    Kind("runtime.json", json_document(RUNTIME_BASE), kind_bundle_json("runtime.json")),
    Kind("render.json", json_document(RENDER_BASE), kind_bundle_json("render.json")),
    Kind("matrix-doc", matrix_document(), kind_matrix_doc),
    Kind("matrix-file", matrix_text(), kind_matrix_file),
)
