"""The plain `envlock resolve` command lines read without argparse
(envlock.cli.quick_parse) give exactly what argparse gives; every other line
is left to argparse."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envlock.cli import build_parser, main
from envlock.commands.resolve import quick_args

FLAGS = ["--python", "--cuda", "--cudnn", "--driver", "--os", "--cuda-source", "--gpu", "--json"]
OTHER = ["-h", "--help", "--pyth", "--js", "--", "-", "--json=1", "--gpus", "-x", "--python="]
VALUES = [
    "3.11",
    "12.2",
    "auto",
    "system",
    "pip",
    "bogus",
    "",
    "-1",
    "-3.11",
    "tensorflow==2.15",
    "tensorflow",
    "a b",
    "x=y",
    "ubuntu22.04",
]

tokens = st.one_of(
    st.sampled_from(FLAGS),
    st.sampled_from(OTHER),
    st.sampled_from(VALUES),
    st.sampled_from(FLAGS).flatmap(lambda f: st.sampled_from(VALUES).map(lambda v: f"{f}={v}")),
    st.text(alphabet="-=abc12. ", max_size=6),
)


# lines made of well-formed pieces around one SPEC, so that most take the quick
# way (with some values argparse refuses: "bogus" for --cuda-source, "-1", "")
_pair = st.sampled_from(FLAGS[:-1]).flatmap(
    lambda f: st.sampled_from(VALUES).map(lambda v: [f, v] if len(v) % 2 else [f"{f}={v}"])
)
plain_lines = st.builds(
    lambda pairs, spec, at, json: [t for p in pairs[:at] for t in p]
    + [spec]
    + [t for p in pairs[at:] for t in p]
    + (["--json"] if json else []),
    st.lists(_pair, max_size=5),
    st.sampled_from(["tensorflow==2.15", "tensorflow", "tensorflow>=2.14,<2.17", "x"]),
    st.integers(0, 5),
    st.booleans(),
)


def _argparse(argv: list[str]) -> dict[str, object] | None:
    """What argparse makes of `envlock resolve ARGV`, or None when it refuses it."""
    parser = build_parser(["resolve"])
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            ns = parser.parse_args(["resolve", *argv])
        except SystemExit:
            return None
    return vars(ns)


@settings(max_examples=1500, deadline=None)
@given(st.lists(tokens, max_size=7) | plain_lines)
def test_quick_args_agree_with_argparse(argv: list[str]) -> None:
    quick = quick_args(argv)
    if quick is None:
        return  # argparse reads it (or refuses it) with its own messages
    full = _argparse(argv)
    assert full is not None, f"quick_parse accepted {argv!r}, argparse refuses it"
    assert vars(quick) == full


@pytest.mark.parametrize(
    "argv",
    [
        ["tensorflow==2.15", "--json"],
        ["--json", "tensorflow"],
        ["tensorflow>=2.14,<2.17", "--python", "3.10", "--cuda-source=pip"],
        ["tensorflow", "--gpu", "9.0", "--gpu=NVIDIA H200", "--driver", "535.104.05"],
        ["tensorflow", "--os", "ubuntu20.04", "--os", "ubuntu22.04"],
    ],
)
def test_plain_lines_take_the_quick_way(argv: list[str]) -> None:
    quick = quick_args(argv)
    assert quick is not None
    assert vars(quick) == _argparse(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["tensorflow", "--pyth", "3.11"],  # argparse's abbreviations
        ["tensorflow", "--cuda-source", "bogus"],  # argparse's message
        ["tensorflow", "--python"],
        ["tensorflow", "extra"],
        [],
        ["tensorflow", "--driver", "-1"],
    ],
)
def test_other_lines_are_left_to_argparse(argv: list[str]) -> None:
    assert quick_args(argv) is None


def test_bad_lines_still_get_argparse_messages(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as err:
        main(["resolve", "tensorflow", "--cuda-source", "bogus"])
    assert err.value.code == 2
    assert "argument --cuda-source: invalid choice: 'bogus'" in capsys.readouterr().err


def test_a_plain_resolve_imports_no_argparse() -> None:
    code = (
        "import sys, contextlib, io\n"
        "from envlock.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['resolve', 'tensorflow==2.15', '--json']) == 0\n"
        "print(sorted(m for m in ('argparse', 'gettext', 'envlock.parser') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
