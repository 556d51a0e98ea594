"""Reading the SPEC (envlock.resolve.spec): packaging's Requirement, with
==X.Y widened to the X.Y series."""

from __future__ import annotations

import pytest
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from envlock.errors import UsageError
from envlock.resolve.spec import parse_spec


def test_parse_spec_widens_the_series_and_says_so() -> None:
    spec = parse_spec("tensorflow==2.15")
    assert spec.shown == "==2.15.*" and spec.widened
    assert spec.exact is None and not spec.prereleases
    pinned = parse_spec(" tensorflow==2.15.1 ")
    assert pinned.exact == Version("2.15.1") and pinned.text == "tensorflow==2.15.1"
    assert not pinned.widened and pinned.shown == "==2.15.1"
    ranged = parse_spec("TensorFlow >= 2.14, <2.17")
    assert ranged.shown == "<2.17,>=2.14" and not ranged.widened
    candidates = ("2.13.1", "2.14.0", "2.16.2", "2.17.0")
    assert [v for v in candidates if ranged.admits(Version(v))] == ["2.14.0", "2.16.2"]
    assert parse_spec("tensorflow===2.15.1").exact == Version("2.15.1")
    assert parse_spec("tensorflow==2.16.0rc0").prereleases


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
def test_specs_are_read_or_refused_as_packaging_does(text: str) -> None:
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        with pytest.raises(UsageError, match="is not a valid requirement"):
            parse_spec(text)
        return
    if canonicalize_name(requirement.name) != "tensorflow" or requirement.url or requirement.marker:
        with pytest.raises(UsageError):
            parse_spec(text)
        return
    spec = parse_spec(text)
    assert spec.and_cuda == ("and-cuda" in requirement.extras)


# --------------------------------------------------- epochs, local labels, absurd lengths


def test_an_epoch_is_kept_when_widening() -> None:
    """``==1!2.15`` is the 2.15 series of epoch 1 (packaging's reading), not 2.15."""
    spec = parse_spec("tensorflow==1!2.15")
    assert spec.shown == "==1!2.15.*" and spec.epoch and not spec.local
    assert not spec.admits(Version("2.15.1"))
    assert spec.admits(Version("1!2.15.1"))
    assert parse_spec("tensorflow==0!2.15").shown == "==2.15.*"
    assert parse_spec("tensorflow>=1!2.0").epoch
    assert parse_spec("tensorflow==2.15.1+cpu").local


@pytest.mark.parametrize(
    ("argv", "message", "hint"),
    [
        (
            ["tensorflow==1!2.15"],
            "no tensorflow release matches 'tensorflow==1!2.15'",
            "tensorflow releases are all in epoch 0; drop the 'N!' part",
        ),
        (
            ["tensorflow>=1!2.0"],
            "no tensorflow release matches 'tensorflow>=1!2.0'",
            "tensorflow releases are all in epoch 0",
        ),
        (
            ["tensorflow==2.15.1+cpu"],
            "no tensorflow release matches 'tensorflow==2.15.1+cpu'",
            "no local labels; drop the '+...' part",
        ),
        (
            ["tensorflow==" + "9" * 5000],  # was a ValueError traceback (int digits limit)
            "is longer than 200 characters",
            "write a requirement on tensorflow",
        ),
        (
            ["tensorflow==2." + "9" * 150],
            "no tensorflow release matches 'tensorflow==2.99999",
            "the matrix has tensorflow 2.0.0 to",
        ),
        (["tensorflow==2.999999999999999999999999"], "no tensorflow release matches", "2.0.0"),
        (["tensorflow", "--python", "3.99999999999999999999"], "is not a CPython minor", "3.11"),
        (["tensorflow", "--driver", "1e400"], "is not a driver version", "535.104.05"),
        (["tensorflow", "--cuda", "9" * 5000], "... (5000 characters) is not a CUDA", "12.2"),
    ],
)
def test_odd_versions_are_refused_by_packaging_rules(
    argv: list[str], message: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from envlock.cli import main

    assert main(["resolve", *argv]) == 2
    err = capsys.readouterr().err
    first, second = err.splitlines()
    assert first.startswith("envlock: error: ") and message in first
    assert second.startswith("  hint: ") and hint in second
    assert len(err) < 600
