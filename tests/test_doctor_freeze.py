"""envlock doctor --lock DIR --freeze FILE: a published package list judged as the
environment (no venv), framework changes as the root findings, the capture's
left-out lines named as not checked; bad lists and flags are exit 2."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

from envlock.bundle import left_out
from envlock.cli import main
from envlock.lock import read_lock
from envlock.notebook import with_target

GOLDEN = Path(__file__).parent / "golden" / "render" / "tf2.15-system"
# the lock's own graph for the packages the test moves (the golden lock records none)
DEPENDENCIES = {
    "tensorflow": ["keras", "numpy", "protobuf", "tensorboard", "wrapt"],
    "tensorboard": ["markdown", "numpy", "protobuf", "werkzeug"],
    "werkzeug": ["markupsafe"],
}
LOCKED = [f"{p.name}=={p.version}" for p in read_lock(GOLDEN).packages]
# the platform moved TensorFlow across Keras 3, and with it what TF requires
MOVED = {
    "tensorflow": "2.16.1",
    "keras": "3.3.3",
    "tensorboard": "2.16.2",
    "protobuf": "4.25.3",
    "werkzeug": "3.0.3",
    "markupsafe": "2.1.5",
    "idna": "3.7",
}
LEFT = left_out.LeftOut(
    "torch==2.3.0+cu121",
    "torch",
    "other-index",
    "the +cu121 build comes from PyTorch's cu121 index",
    None,
)


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """The TF 2.15 lock with its graph for the moved packages, and a left-out.json."""
    out = tmp_path / "D"
    shutil.copytree(GOLDEN, out)
    text = (out / "pylock.toml").read_text()
    for name, deps in DEPENDENCIES.items():
        head = f'[[packages]]\nname = "{name}"\n'
        at = text.index(head)
        end = text.index("\n", text.index("version = ", at)) + 1
        listed = ", ".join(f'{{ name = "{d}" }}' for d in deps)
        text = text[:end] + f"dependencies = [{listed}]\n" + text[end:]
    (out / "pylock.toml").write_text(text)
    doc = left_out.LeftOutFile("-r F", "3.11", "--python 3.11", len(LOCKED) + 1, 42, (LEFT,))
    (out / left_out.FILE).write_bytes(doc.to_bytes())
    return out


def freeze_file(tmp_path: Path, extra: tuple[str, ...] = ()) -> Path:
    lines = []
    for pin in LOCKED:
        name = pin.split("==")[0]
        lines.append(f"{name}=={MOVED[name]}" if name in MOVED else pin)
    lines += ["torch==2.3.1+cu121", *extra]
    path = tmp_path / "pip-freeze.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def doctor(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["doctor", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_framework_changes_are_the_roots_and_the_rest_folds(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    freeze = freeze_file(tmp_path)
    code, doc = doctor(["--lock", str(bundle), "--freeze", str(freeze), "--python", "3.11"], capsys)
    assert code == 1 and doc["status"] == "FAILED"
    assert doc["freeze"] == str(freeze) and doc["host"] is None
    top = [(f["status"], f["check"]) for f in doc["findings"]]
    assert top == [
        ("PASS", "python"),
        ("FAIL", "tensorflow version"),
        ("FAIL", "keras version"),
        ("FAIL", "packages"),
        ("INFO", "requirements"),
        ("INFO", "driver"),
        ("INFO", "left out of the lock"),
        ("INFO", "restore"),
    ]
    found = {f["check"]: f for f in doc["findings"]}
    where = f"--freeze {freeze}"
    restore = shlex.join(["%envlock", "restore", str(bundle), "--in-place"])
    tf = found["tensorflow version"]
    assert tf["cause"] == (
        f"tensorflow 2.16.1 is in {where}; the lock has 2.15.1; its CUDA: CUDA 12.3, cuDNN 8.9 "
        "(its matrix row) there, CUDA 12.2, cuDNN 8.9 (its matrix row) in the lock; "
        "3 package findings follow from it (folded)"
    )
    assert tf["fix"] == restore
    # Keras 3 becomes tf.keras first; then what TF requires itself (the lock's graph)
    assert [g["check"] for g in tf["folded"]] == [
        "keras",
        "package protobuf",
        "package tensorboard",
    ]
    assert tf["folded"][0]["cause"].startswith("tensorflow 2.16.1 makes tf.keras Keras 3; ")
    assert found["keras version"]["cause"] == f"keras 3.3.3 is in {where}; the lock has 2.15.0"
    others = found["packages"]
    # tensorboard's werkzeug (and its markupsafe) are not TF's own: the rest
    assert [g["check"] for g in others["folded"]] == [
        "package idna",
        "package markupsafe",
        "package werkzeug",
    ]
    assert others["folded"][0]["cause"] == "idna 3.7 is listed; the lock has 3.20"
    # torch is the line the capture left out: named as such, no "not locked" warning
    left = found["left out of the lock"]
    assert left["cause"] == (
        "1 line(s) of the capture are not in the lock, so not checked (1 needs an index not "
        "given); each is folded here with its reason"
    )
    assert left["folded"] == [
        {
            "check": "left out torch",
            "status": "INFO",
            "cause": "torch==2.3.0+cu121: needs an index not given: the +cu121 build comes "
            "from PyTorch's cu121 index; listed here: torch 2.3.1+cu121",
            "fix": "",
            "manual": False,
        }
    ]
    assert found["restore"]["fix"] == restore
    assert found["restore"]["cause"].startswith("in place: the platform runs Python 3.11, ")


def test_another_python_is_a_root_and_restore_is_a_new_venv(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    freeze = freeze_file(tmp_path)
    code, doc = doctor(["--lock", str(bundle), "--freeze", str(freeze), "--python", "3.12"], capsys)
    found = {f["check"]: f for f in doc["findings"]}
    assert code == 1 and found["python"]["status"] == "FAIL"
    # not folded under the Python: the frameworks stay roots beside it
    assert found["tensorflow version"]["status"] == "FAIL"
    assert found["restore"]["fix"] == shlex.join(["envlock", "restore", str(bundle)])
    assert found["restore"]["cause"].startswith(
        "a new venv: the platform runs Python 3.12, the lock is for 3.11; "
    )
    assert found["python"]["fix"] == found["restore"]["fix"]


def test_the_same_list_passes_and_the_driver_floor_is_judged(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    freeze = tmp_path / "same.txt"
    freeze.write_text("\n".join(LOCKED) + "\n")
    argv = ["--lock", str(bundle), "--freeze", str(freeze), "--python", "3.11"]
    code, doc = doctor([*argv, "--driver", "470.57.02"], capsys)
    found = {f["check"]: f for f in doc["findings"]}
    assert found["packages"] == {
        "check": "packages",
        "status": "PASS",
        "cause": f"all {len(LOCKED)} locked distributions at their versions",
        "fix": "",
        "manual": False,
    }
    assert found["driver"]["status"] == "FAIL"
    assert found["driver"]["cause"].startswith(
        "driver 470.57.02 (--driver) is older than 525.60.13, which tensorflow 2.15.1 "
    )
    assert "restore" not in found and code == 1
    code, doc = doctor([*argv, "--driver", "535.104.05"], capsys)
    assert code == 0 and doc["status"] == "PASSED"
    assert "restore" not in {f["check"] for f in doc["findings"]}


def test_the_text_names_the_roots_and_counts_the_folded(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    freeze = freeze_file(tmp_path, tuple(f"extra-{i}==1.0" for i in range(3)))
    assert main(["doctor", "--lock", str(bundle), "--freeze", str(freeze)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"FAILED: against the lock in {bundle}\n")
    assert f"\npackage list: {freeze} (no Python given; no venv probed)\n" in out
    assert "INFO    python " in out and "names no Python; give the platform's" in out
    assert "run: " + shlex.join(["%envlock", "restore", str(bundle), "--in-place"]) in out


def test_a_notebook_cell_takes_the_list_not_the_kernel() -> None:
    args = ["doctor", "--lock", "D", "--freeze", "F"]
    # no --venv (the list is the environment), and the fixes as cell lines
    assert with_target(args, "/usr/bin/python3") == [*args, "--notebook"]
    assert with_target(["restore", "D", "--in-place"], "/k/python") == [
        "restore",
        "--venv",
        "/k/python",
        "D",
        "--in-place",
    ]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("numpy==1.26.4\nnumpy>=1.0\n", "line 2: 'numpy>=1.0' is not pinned to one version"),
        ("numpy==1.26.4\n\n# c\n--index-url x\n", "line 4: '--index-url x': --index-url is not"),
        ("numpy==1.26.4\n!!\n", "line 2: '!!' is not a requirement"),
        ("numpy==1.26.4\nNumPy==1.26.3\n", "1 name(s) listed twice"),
        ("# only a comment\n", "no package lines in it"),
        ("a==1\n" * 20_001, "20001 lines, more than a package list has"),
    ],
)
def test_a_bad_freeze_is_exit_2_naming_the_line(
    bundle: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    text: str,
    said: str,
) -> None:
    freeze = tmp_path / "bad.txt"
    freeze.write_text(text)
    assert main(["doctor", "--lock", str(bundle), "--freeze", str(freeze)]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


def test_bad_files_and_flags_are_exit_2(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    freeze = freeze_file(tmp_path)
    huge = tmp_path / "huge.txt"
    huge.write_bytes(b"a==1\n" + b"#" * (4 * 1024 * 1024))
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"a==1\n\xff\xfe\n")
    cases = [
        (["--freeze", str(freeze)], "--freeze does not go with no --lock DIR"),
        (["--lock", str(bundle), "--freeze", str(tmp_path / "none")], "no such file"),
        (["--lock", str(bundle), "--freeze", str(tmp_path)], str(tmp_path)),
        (["--lock", str(bundle), "--freeze", str(huge)], str(huge)),
        (["--lock", str(bundle), "--freeze", str(binary)], str(binary)),
        (["--lock", str(bundle), "--python", "3.11"], "--python does not go with a live venv"),
        (["--lock", str(bundle), "--freeze", str(freeze), "--python", "3"], "--python '3' is"),
        (["--lock", str(bundle), "--freeze", str(freeze), "--python", "3.11.2"], "not a Python"),
        (["--lock", str(bundle), "--freeze", str(freeze), "--venv", "x"], "--venv (the list"),
        (["--lock", str(bundle), "--freeze", str(freeze), "--gpu", "T4"], "--gpu does not go"),
        (["--lock", str(bundle), "--freeze", str(freeze), "--log", "-"], "--log (explain"),
        (["--lock", str(bundle), "--freeze", str(freeze), "--driver", "auto"], "the platform's"),
    ]
    for argv, said in cases:
        assert main(["doctor", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert said in err and "hint:" in err and "Traceback" not in err, (argv, err)


def test_a_crafted_left_out_json_is_exit_2_and_a_link_is_not_followed(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    freeze = freeze_file(tmp_path)
    argv = ["doctor", "--lock", str(bundle), "--freeze", str(freeze)]
    path = bundle / left_out.FILE
    doc = json.loads(path.read_text())
    doc["left_out"][0]["command"] = "rm -rf ~\n"  # not one line of text
    path.write_text(json.dumps(doc))
    assert main(argv) == 2
    assert "left_out[0].command: expected a line of text or null" in capsys.readouterr().err
    secret = tmp_path / "elsewhere.json"
    secret.write_text(json.dumps(LEFT.to_dict()))
    path.unlink()
    path.symlink_to(secret)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "Traceback" not in err
    path.unlink()
    assert main(argv) == 1  # no left-out.json: a lock, not a capture
    assert "left out of the lock" not in capsys.readouterr().out


def test_restore_refuses_a_bad_left_out_json_before_building(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    venv = tmp_path / "venv"
    path = bundle / left_out.FILE
    doc = json.loads(path.read_text())
    doc["left_out"][0]["reason"] = "../../etc"
    path.write_text(json.dumps(doc))
    for mode in ([], ["--in-place"]):
        assert main(["restore", str(bundle), "--venv", str(venv), *mode]) == 2
        err = capsys.readouterr().err
        assert f"{path}: left_out[0].reason: expected one of os-package" in err
        assert "hint: capture again, or remove" in err and "Traceback" not in err
        assert not venv.exists() and not list(tmp_path.glob("venv.envlock-*"))


def test_a_left_out_pip_command_is_aimed_at_the_restored_interpreter() -> None:
    recorded = "/b/D/.venv/bin/python -m pip install --no-deps 'x @ https://h/x-1-py3-none-any.whl'"
    assert left_out.retarget(recorded, "/k/bin/python") == (
        "/k/bin/python -m pip install --no-deps 'x @ https://h/x-1-py3-none-any.whl'"
    )
    other = "envlock capture -r F --index-url https://h/simple -o D"
    assert left_out.retarget(other, "/k/bin/python") == other
    assert left_out.retarget(None, "/k/bin/python") is None
    assert left_out.retarget("/b/.venv/bin/python -m pip install 'unclosed", "/k") == (
        "/b/.venv/bin/python -m pip install 'unclosed"
    )


def test_through_a_notebook_cell_every_step_is_a_cell_line(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``%envlock doctor --freeze`` (which adds --notebook): every run: step of every
    way is a cell line, the in-place restore once as it is (not through ``!``)."""
    freeze = freeze_file(tmp_path, ("extra-0==1.0",))
    args = ["doctor", "--lock", str(bundle), "--freeze", str(freeze), "--python", "3.11"]
    assert main([*args, "--notebook", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    steps = [
        step["text"]
        for f in doc["findings"]
        for g in [f, *f.get("folded", [])]
        for way in g.get("ways", [])
        for step in way["steps"]
        if step["kind"] == "run"
    ]
    assert steps, doc["findings"]
    assert all(s.startswith(("%envlock ", "%env ", "!")) for s in steps), steps
    assert not [s for s in steps if s.startswith("!%")]
    restore = shlex.join(["%envlock", "restore", str(bundle), "--in-place"])
    assert restore in steps
