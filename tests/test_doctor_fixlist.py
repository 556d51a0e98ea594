"""How doctor says its fixes (#42): ways out as alternatives under one heading,
folded consequences as one row, every line fitted to the width with commands
that still run as printed, notebook cell lines in a notebook. Fake probe results
(tests/test_doctor_findings.py's), the real findings and the real renderer."""

from __future__ import annotations

import dataclasses
import json
import shlex
import subprocess
import sys
from typing import Any

import pytest
from test_doctor_findings import LOCK, context, dist, healthy_probe

from envlock.doctor import findings as F
from envlock.doctor.advice import RESTART, Finding, in_notebook
from envlock.doctor.fixlist import command_lines, describe, fix_lines
from envlock.model import Constraints
from envlock.resolve import resolve

HASH_NUMPY = next(w.sha256 for p in LOCK.packages if p.name == "numpy" for w in p.wheels)
HASH_TF = next(w.sha256 for p in LOCK.packages if p.name == "tensorflow" for w in p.wheels)


def upgraded(**kw: Any) -> list[Finding]:
    """The platform's upgrade: TensorFlow 2.15.1 -> 2.16.2 (Keras 3), numpy 2.1.3."""
    probe = healthy_probe()
    probe["tensorflow"]["version"] = "2.16.2"
    for d in probe["distributions"]:
        if d["name"] == "tensorflow":
            d["version"] = "2.16.2"
        if d["name"] == "numpy":
            d["version"] = "2.1.3"
    return F.judge(probe, context(**kw))


def report(found: list[Finding]) -> dict[str, Any]:
    return {"status": F.overall(found), "lock": "env", "findings": [f.to_dict() for f in found]}


def test_the_ways_out_of_an_upgrade_are_alternatives_under_one_heading() -> None:
    """Restoring 2.15.1 and staying on 2.16 with tf-keras undo each other: numbered
    under 'either', the version row and the Keras row under one heading; the package
    rows' two ways likewise, each package's own command in the second."""
    lines = fix_lines([f.to_dict() for f in upgraded()], 80)
    assert "\n".join(lines) == "\n".join(
        [
            "  package numpy, package tensorflow: either",
            "    1) the whole environment back to the lock:",
            "         run: envlock restore env --venv /work/venv",
            "    or 2) only the packages that moved, with the lock's hashes (every command",
            "          below):",
            "            run: printf '%s\\n' \\",
            f"                   'numpy==1.26.4 --hash=sha256:{HASH_NUMPY}' \\",
            "                   | /work/venv/bin/python -m pip install --no-deps \\",
            "                   --require-hashes -r /dev/stdin",
            "            run: printf '%s\\n' \\",
            f"                   'tensorflow==2.15.1 --hash=sha256:{HASH_TF}' \\",
            "                   | /work/venv/bin/python -m pip install --no-deps \\",
            "                   --require-hashes -r /dev/stdin",
            "  tensorflow version, keras: either",
            "    1) back to tensorflow 2.15.1, the lock's:",
            "         run: envlock restore env --venv /work/venv",
            "    or 2) stay on tensorflow 2.16.2 with Keras 2 (tf-keras; TensorFlow reads",
            "          TF_USE_LEGACY_KERAS=1 when it is imported, so set it where the program",
            "          starts):",
            "            run: /work/venv/bin/python -m pip install 'tf-keras~=2.16.0'",
            "            run: export TF_USE_LEGACY_KERAS=1",
        ]
    )


def test_json_carries_the_ways_with_their_steps() -> None:
    by = {f["check"]: f for f in report(upgraded())["findings"]}
    assert [w["label"] for w in by["keras"]["ways"]] == [
        "back to tensorflow 2.15.1, the lock's",
        "stay on tensorflow 2.16.2 with Keras 2 (tf-keras; TensorFlow reads "
        "TF_USE_LEGACY_KERAS=1 when it is imported, so set it where the program starts)",
    ]
    assert by["keras"]["ways"][1]["steps"] == [
        {"kind": "run", "text": "/work/venv/bin/python -m pip install 'tf-keras~=2.16.0'"},
        {"kind": "run", "text": "export TF_USE_LEGACY_KERAS=1"},
    ]
    # the old keys say the same: the first way as fix, the others as alternatives
    assert by["keras"]["fix"] == "envlock restore env --venv /work/venv"
    assert by["keras"]["alternatives"] == [
        "/work/venv/bin/python -m pip install 'tf-keras~=2.16.0' && export TF_USE_LEGACY_KERAS=1"
    ]
    assert by["tensorflow version"]["ways"] == by["keras"]["ways"]
    # a fix with one way: one unlabelled way
    assert by["package numpy"]["ways"][0]["steps"] == [
        {"kind": "run", "text": "envlock restore env --venv /work/venv"}
    ]


def test_a_changed_python_folds_its_package_rows_into_one_row() -> None:
    probe = healthy_probe()
    probe["python"] = {"version": "3.12.3"}
    probe["distributions"] = [dist("pip", "24.0")]
    doc = report(F.judge(probe, context()))
    (python,) = [f for f in doc["findings"] if f["check"] == "python"]
    count = len(python["folded"])
    assert count == len(LOCK.packages)
    names = sorted(f"package {p.name}" for p in LOCK.packages)
    text = describe(doc, 200)
    caused = [" ".join(line.split()) for line in text.splitlines() if " caused " in line]
    assert caused == [
        f"{count} caused {', '.join(names[:4])} and {count - 4} more "
        "(--verbose or --json lists each)"
    ]
    assert not [n for n in names[4:] if n in text]  # the rest are counted, not listed
    verbose = describe(doc, 200, verbose=True)
    assert all(f"  {n}  " in verbose for n in names)


def test_a_fix_names_the_bundle_past_a_handful_of_pins() -> None:
    """A captured bundle pins every package: its lock command for another Python
    names the bundle (--pins-from), not one --with per pin."""
    probe = healthy_probe()
    probe["python"] = {"version": "3.12.3"}
    few = dataclasses.replace(LOCK.input, with_requirements=("numpy==1.26.4",) * 5)
    many = dataclasses.replace(LOCK.input, with_requirements=tuple(f"p{i}==1" for i in range(6)))
    for pins, want in [
        (few, " --with numpy==1.26.4" * 5),
        (many, " --pins-from env"),
    ]:
        lock = dataclasses.replace(LOCK, input=pins)
        (python,) = [f for f in F.judge(probe, context(lock=lock)) if f.check == "python"]
        newest = resolve(Constraints(spec="tensorflow", python="3.12")).version
        assert python.alternatives == (
            f"envlock lock tensorflow=={newest} --python 3.12{want} -o env-tensorflow{newest}",
        )


def test_in_a_notebook_the_fixes_are_cell_lines_on_the_kernel_with_its_restart() -> None:
    found = [in_notebook(f) for f in upgraded(notebook=True)]
    by = {f.check: f for f in found}
    back, stay = by["keras"].ways
    assert back.steps == (
        ("run", "%envlock restore env --venv /work/venv/bin/python --in-place"),
        ("do", RESTART),
    )
    assert stay.steps == (
        ("run", "!/work/venv/bin/python -m pip install 'tf-keras~=2.16.0'"),
        ("do", RESTART),
        ("run", "%env TF_USE_LEGACY_KERAS=1"),  # after the restart, which forgets it
    )
    # each package's line, then one restart for all of them
    lines = fix_lines([f.to_dict() for f in found], 80)
    second = lines[
        lines.index(
            "    or 2) only the packages that moved, with the lock's hashes (every command"
        ) :
    ]
    runs = [line.strip() for line in second if line.strip().startswith(("run:", "do:"))]
    assert [r.split(" ", 2)[:2] for r in runs[:3]] == [["run:", "!printf"]] * 2 + [
        ["do:", "restart"]
    ]
    # a notebook line is never broken: IPython runs it as one line
    assert all(not line.endswith("\\") for line in lines)


def test_a_changed_python_in_a_notebook_is_a_new_kernel() -> None:
    probe = healthy_probe()
    probe["python"] = {"version": "3.12.3"}
    (python,) = [
        in_notebook(f) for f in F.judge(probe, context(notebook=True)) if f.check == "python"
    ]
    assert python.ways[0].steps == (
        ("run", "%envlock restore env --venv ~/envs/env-py3.11 --kernel env-py3.11"),
        (
            "do",
            "switch this notebook to the kernel env-py3.11 (Kernel > Change Kernel) and "
            "run it again",
        ),
    )


ARGV = [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))"]


@pytest.mark.parametrize("width", [40, 60, 100])
def test_a_broken_command_runs_as_the_whole_one(width: int) -> None:
    """Broken between words with the shell's continuation, the printed lines pasted
    into bash are the same command: the same words reach the program."""
    args = [
        "numpy==1.26.4 --hash=sha256:" + "a" * 64,
        "it's",
        'say "hi"',
        "a|b && c",
        "plain",
        "--with",
        "tensorflow==2.15.1",
        "x y",
    ] * 2
    command = shlex.join([*ARGV, *args])
    lines = command_lines(command, "    run: ", "           ", width)
    assert len(lines) > 1
    for line in lines[:-1]:
        assert line.endswith(" \\")
    words = [len(line) > width for line in lines]
    # a line is longer than the width only when it holds one word too long for any
    assert all(
        len(shlex.split(line.removesuffix(" \\").removeprefix("    run: "))) == 1
        for line, over in zip(lines, words, strict=True)
        if over
    )
    printed = "\n".join(lines).replace("    run: ", "", 1)
    done = subprocess.run(["bash", "-c", printed], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == args


def test_every_line_of_the_report_fits_the_width() -> None:
    """Prose wraps under its start; the table wraps its cells; a line overflows
    only by a word that cannot be broken (a path, a quoted hash line): without
    that word it fits."""
    for width in (60, 80, 120):
        text = describe(report(upgraded()), width)
        for line in text.splitlines():
            if len(line) > width:
                longest = max(shlex.split(line.removesuffix(" \\"), posix=False), key=len)
                assert len(line) - len(longest) <= width, (width, line)


@pytest.mark.slow  # two locks and their bundles against a fake index: 110 s on this machine
def test_lock_pins_from_takes_the_pins_a_bundle_was_made_with(
    make_index: Any,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The command a fix prints past a handful of pins: envlock lock ... --pins-from
    DIR locks with DIR's --with lines (then any given here)."""
    from envlock.cli import main
    from envlock.lock import read_lock

    idx = make_index()
    idx.add_dist("tensorflow", "2.15.1", tag="py3-none-manylinux_2_17_x86_64")
    for name in ("dep-a", "dep-b"):
        for v in ("1.0", "1.5"):
            idx.add_dist(name, v)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    common = ["--index-url", idx.url, "--base-image", "envlock-test/bookworm-python:1"]
    common += ["--python-from", "image"]
    first, second = tmp_path / "env", tmp_path / "env-again"
    assert (
        main(["lock", "tensorflow==2.15", "--with", "dep-a==1.0", "-o", str(first), *common]) == 0
    )
    argv = ["lock", "tensorflow==2.15", "--pins-from", str(first), "--with", "dep-b==1.0"]
    assert main([*argv, "-o", str(second), *common]) == 0
    again = read_lock(second)
    assert again.input.with_requirements == ("dep-a==1.0", "dep-b==1.0")
    assert {p.name: p.version for p in again.packages if p.name.startswith("dep-")} == {
        "dep-a": "1.0",
        "dep-b": "1.0",
    }
    capsys.readouterr()
    # no bundle there, or with --check (which reuses DIR's own pins): bad input
    assert main(["lock", "tensorflow==2.15", "--pins-from", str(tmp_path), "-o", "x"]) == 2
    assert "--pins-from" in capsys.readouterr().err
    assert main(["lock", "--check", str(first), "--pins-from", str(first)]) == 2
    assert "the options that make a lock: --pins-from is not used" in capsys.readouterr().err
