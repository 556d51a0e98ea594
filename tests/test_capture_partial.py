"""envlock capture -r (#41, part 1): a partial capture is a result, against a local fake index.

One freeze holds a line of each kind a platform's freeze holds: a pin the index
serves, a yanked one, a source-only one (left out under ``--only-binary``; without
it the sdist is locked: test_lock_sdist_locked.py), an OS package, a ``+cu128``
build, a direct file install. The lock holds what can be locked; every other line is
listed once with its reason and the command that takes it in, and those
commands run as printed.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from fixtures.index.fakeindex import FakeIndex, make_dist
from report_support import run_cli
from test_lock import FW_TAG

from envlock.bundle import left_out
from envlock.errors import UsageError
from envlock.index.pep691 import IndexFile
from envlock.venv import leftout

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the fake wheels are cp311")


@pytest.fixture(scope="module")
def index(make_module_index: Callable[..., FakeIndex]) -> FakeIndex:
    idx = make_module_index()
    idx.add_dist("tensorflow", "2.15.1", tag=FW_TAG, requires=("dep-a>=1",))
    idx.add_dist("dep-a", "1.1")
    idx.add(make_dist("dep-y", "1.0")).yanked = "broken"
    idx.add_dist("dep-y", "1.1")
    idx.add_sdist("dep-s", "2.3")
    idx.add_dist("dep-t", "1.0")  # the index's build; the freeze has 1.0+cu128
    idx.add_dist("dep-n", "1.0", requires_python=">=3.12")
    idx.add_sdist("dbus-python", "1.2.18")
    return idx


def _freeze(tmp_path: Path, *lines: str) -> Path:
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("\n".join(("tensorflow==2.15.1", *lines)) + "\n", encoding="utf-8")
    return freeze


def _os_info(tmp_path: Path) -> Path:
    info = tmp_path / "os-info.txt"
    info.write_text("# os-info\nUbuntu 22.04.5 LTS\nPython 3.11.9\nR version 4.5\n")
    return info


@pytest.mark.venv
@pytest.mark.slow  # five resolver rounds, a venv and a direct install run as printed: 36 s loaded
def test_a_partial_capture_locks_the_rest_and_names_every_line_left_out(
    index: FakeIndex, tmp_path: Path
) -> None:
    wheel = tmp_path / "dep_f-1.0-py3-none-any.whl"
    wheel.write_bytes(make_dist("dep-f", "1.0").data)
    direct = f"dep-f @ {wheel.as_uri()}"
    freeze = _freeze(
        tmp_path, "dep-a==1.1", "dep-y==1.0", "dep-s==2.3", "dbus-python==1.2.18",
        "dep-t==1.0+cu128", direct,
    )  # fmt: skip
    out = tmp_path / "env"
    argv = ["capture", "-r", str(freeze), "--os-info", str(_os_info(tmp_path)), "-o", str(out),
            "--cuda-source", "system", "--index-url", index.url, "--only-binary"]  # fmt: skip
    code, stdout, err = run_cli(*argv)
    assert code == 0, err
    assert f"Python 3.11: --os-info {tmp_path / 'os-info.txt'} says Python 3.11.9\n" in stdout
    assert stdout.endswith(
        "locked 2 of 7; 5 left out: 1 installed by the OS package manager, 1 needs an index "
        "not given, 1 yanked or removed from the index, 1 a direct URL, file or VCS install, "
        "1 no distribution for this Python/platform\n"
    )
    recorded = left_out.read(out)
    assert recorded is not None and (recorded.python, recorded.lines, recorded.locked) == (
        "3.11", 7, 2,
    )  # fmt: skip
    by_line = {item.line: item for item in recorded.left_out}
    assert {line: item.reason for line, item in by_line.items()} == {
        "dbus-python==1.2.18": "os-package",
        "dep-t==1.0+cu128": "other-index",
        "dep-y==1.0": "yanked",
        direct: "direct",
        "dep-s==2.3": "no-distribution",
    }
    for item in recorded.left_out:  # each listed once, with its reason, on stdout
        assert stdout.count(f"  {item.describe()}\n") == 1
    assert by_line["dbus-python==1.2.18"].command == "apt-get install -y python3-dbus"
    assert "nearest with a wheel for CPython 3.11" in by_line["dep-y==1.0"].detail
    assert "the +cu128 build comes from PyTorch's cu128 index" in by_line["dep-t==1.0+cu128"].detail
    assert "only a source archive of it (--only-binary)" in by_line["dep-s==2.3"].detail
    assert "dep-a==1.1" in (out / "requirements.txt").read_text()
    manifest = json.loads((out / "envlock-manifest.json").read_text())
    assert left_out.FILE in json.dumps(manifest)  # written in the bundle's own switch

    # the printed commands run as printed: the capture again with the nearest version
    again = by_line["dep-y==1.0"].command
    assert again is not None
    words = shlex.split(again)
    assert words[:2] == ["envlock", "capture"] and words[-2:] == ["--with", "dep-y==1.1"]
    assert "--only-binary" in words
    code, stdout, err = run_cli(*words[1:])
    assert code == 0, err
    assert "dep-y==1.1 \\" in (out / "requirements.txt").read_text()
    assert "locked 3 of 7; 4 left out" in stdout
    # and the direct install goes into the venv restore makes (DIR/.venv, as bootstrap.sh)
    subprocess.run([sys.executable, "-m", "venv", str(out / ".venv")], check=True)
    pip = by_line[direct].command
    assert pip is not None and pip.startswith(f"{out / '.venv' / 'bin' / 'python'} -m pip ")
    subprocess.run(shlex.split(pip), check=True, capture_output=True)
    assert list((out / ".venv" / "lib").glob("python3.*/site-packages/dep_f-1.0.dist-info"))


def test_strict_is_exit_1_and_writes_nothing(index: FakeIndex, tmp_path: Path) -> None:
    freeze = _freeze(tmp_path, "dep-a==1.1", "dep-s==2.3")
    out = tmp_path / "env"
    code, _, err = run_cli(
        "capture", "-r", str(freeze), "--python", "3.11", "-o", str(out), "--strict",
        "--cuda-source", "system", "--index-url", index.url, "--only-binary",
    )  # fmt: skip
    assert code == 1
    assert "1 of 3 line(s) of" in err and "dep-s==2.3: no distribution for this" in err
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize(
    ("lines", "python", "said"),
    [
        (("dep-a==1.1", "Dep_A==1.1"), "3.11", "1 name(s) listed twice"),
        (("dep-a==1.1", "no-such-thing==0.1"), "3.11", "1 line(s) name a project the index"),
        (("dep-a==1.1", "dep-n==1.0"), "3.11", "--python 3.11 contradicts 1 line(s)"),
    ],
)
def test_bad_input_is_one_message_and_nothing_written(
    index: FakeIndex, tmp_path: Path, lines: tuple[str, ...], python: str, said: str
) -> None:
    out = tmp_path / "env"
    code, _, err = run_cli(
        "capture", "-r", str(_freeze(tmp_path, *lines)), "--python", python, "-o", str(out),
        "--cuda-source", "system", "--index-url", index.url,
    )  # fmt: skip
    assert code == 2, err
    assert said in err and "Traceback" not in err
    assert err.count("envlock: error:") == 1
    assert not out.exists() or not any(out.iterdir())
    if "contradicts" in said:
        assert "  dep-n==1.0: Requires-Python >=3.12" in err


def _f(filename: str, requires_python: str = "") -> IndexFile:
    return IndexFile(filename, "u", "", None, "", False, requires_python)


def test_the_python_a_freeze_fits_is_inferred_with_the_rule_and_the_deciding_pins() -> None:
    found = {
        "a": [_f("a-1.0-cp311-cp311-manylinux_2_17_x86_64.whl"),
              _f("a-1.0-cp312-cp312-manylinux_2_17_x86_64.whl")],
        "b": [_f("b-2.0.tar.gz", ">=3.10")],
        "c": [_f("c-1.0-py3-none-any.whl", ">=3.9")],
    }  # fmt: skip
    choice = leftout.choose_python(["a==1.0", "b==2.0", "c==1.0"], found)
    assert choice.python == "3.12"
    assert choice.how.startswith("Python 3.12: the newest Python for which every one of the 3")
    assert choice.deciding == (
        "not 3.14: no wheel or Requires-Python for it in a==1.0",
        "not 3.13: no wheel or Requires-Python for it in a==1.0",
    )
    assert leftout.contradicting(["b==2.0"], found, "3.9") == [("b==2.0", ">=3.10")]


def test_the_os_info_line_is_read_and_a_file_without_one_is_refused(tmp_path: Path) -> None:
    assert leftout.read_os_info(str(_os_info(tmp_path))) == "3.11.9"
    bad = tmp_path / "bad.txt"
    bad.write_text("Ubuntu 22.04\n")
    with pytest.raises(UsageError, match="no line of the form 'Python 3.X.Y'"):
        leftout.read_os_info(str(bad))


def test_left_out_json_is_validated_when_read(tmp_path: Path) -> None:
    item = left_out.LeftOut("x==1", "x", "yanked", "gone", None)
    doc = left_out.LeftOutFile("-r f", "3.12", "--python", 2, 1, (item,)).to_dict()
    (tmp_path / left_out.FILE).write_text(json.dumps(doc))
    got = left_out.read(tmp_path)
    assert got is not None and got.left_out == (item,)
    doc["left_out"][0]["reason"] = "because"
    (tmp_path / left_out.FILE).write_text(json.dumps(doc))
    with pytest.raises(UsageError, match=r"left_out\[0\]\.reason: expected one of os-package"):
        left_out.read(tmp_path)
    assert left_out.read(tmp_path / "none") is None
