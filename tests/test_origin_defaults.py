"""The environment a bundle was captured from (DIR/captured.json) is what doctor
inspects and restore and wheelhouse's hint act on when no --venv is given, on
the machine it was captured on; elsewhere, or without one, DIR/.venv as before.
Before: both defaulted to DIR/.venv, a new venv inside the bundle, and the
captured project venv stayed broken (issue 20).

The bundle is test_restore's (a real lock of a fake 'tensorflow' from the local
index, a stand-in harness); captured.json is written by envlock.bundle.origin as
capture writes it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from fixtures.index.fakeindex import FakeIndex
from test_bootstrap_drift import installed
from test_restore import bundle, pasted  # noqa: F401  (bundle is a fixture)

from envlock.bundle import origin
from envlock.cli import main
from envlock.venv.restore import find_python


def captured_at(folder: Path, venv: Path | None, interpreter: Path, *, here: bool = True) -> None:
    origin.write(
        folder,
        origin.Origin(
            interpreter=str(interpreter),
            venv=str(venv) if venv else None,
            python="3.10.13",
            platform="Linux x86_64, glibc 2.36",
            machine=origin.machine_id() if here else "0" * 16,
        ),
    )


def project_venv(tmp_path: Path) -> Path:
    """A venv of the lock's Python (3.10) outside the bundle, as a project's is."""
    python = find_python("3.10", None)
    venv = tmp_path / "project" / ".venv"
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv


@pytest.mark.venv
@pytest.mark.other_python
def test_doctor_inspects_the_captured_venv_and_its_fix_names_it(
    bundle: tuple[Path, FakeIndex],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    folder, _ = bundle
    venv = project_venv(tmp_path)
    captured_at(folder, venv, venv / "bin" / "python")
    code = main(["doctor", "--lock", str(folder), "--allow-cpu", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1  # the project venv lacks the lock's packages
    assert doc["interpreter"] == {
        "python": str(venv / "bin" / "python"),
        "chosen_by": "captured",
        "reason": f"the venv {folder} was captured from ({venv}, {folder / origin.FILE})",
    }
    fixes = {f["fix"] for f in doc["findings"] if f["status"] == "FAIL"}
    assert f"envlock restore {folder} --venv {venv} --allow-cpu" in fixes
    assert not (folder / ".venv").exists()


@pytest.mark.main_python  # a restore (see tests/pythons.sh)
@pytest.mark.venv
@pytest.mark.other_python
def test_restore_and_the_wheelhouse_hint_act_on_the_captured_venv(
    bundle: tuple[Path, FakeIndex],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    folder, _ = bundle
    venv = project_venv(tmp_path)
    captured_at(folder, venv, venv / "bin" / "python")
    wh = tmp_path / "wh"
    assert main(["wheelhouse", str(folder), "-o", str(wh)]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    why = f"the venv {folder} was captured from ({folder / origin.FILE})"
    assert line == (
        f"  restore without an index (into {venv}, {why}; give --venv for another venv): "
        f"envlock restore {folder} --venv {venv} --wheelhouse {wh}"
    )
    done = pasted(line.split("another venv): ", 1)[1] + " --allow-cpu", tmp_path)
    assert done.returncode == 0, done.stderr
    assert os.readlink(venv) == ".venv.envlock-1"  # the project venv, switched in place
    assert installed(venv) == {"tensorflow": "2.15.1", "dep-a": "1.5"}
    assert not (folder / ".venv").exists()
    # and restore with no --venv at all says which one it restores
    assert main(["restore", str(folder), "--wheelhouse", str(wh), "--allow-cpu"]) == 0
    err = capsys.readouterr().err
    assert f"envlock restore: no --venv given: {venv}, {why}\n" in err
    assert os.readlink(venv) == ".venv.envlock-2"


@pytest.mark.venv
@pytest.mark.other_python
def test_a_bundle_captured_elsewhere_keeps_the_bundles_own_venv(
    bundle: tuple[Path, FakeIndex],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """Another machine's paths mean nothing here: DIR/.venv, as bootstrap.sh."""
    folder, _ = bundle
    venv = project_venv(tmp_path)
    captured_at(folder, venv, venv / "bin" / "python", here=False)
    wh = tmp_path / "wh"
    assert main(["wheelhouse", str(folder), "-o", str(wh)]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert f"envlock restore {folder} --venv {folder / '.venv'} --wheelhouse {wh}" in line
    assert main(["doctor", "--lock", str(folder), "--allow-cpu", "--json"]) in (0, 1)
    doc = json.loads(capsys.readouterr().out)
    assert doc["interpreter"]["chosen_by"] != "captured"


@pytest.mark.main_python  # a restore (see tests/pythons.sh)
@pytest.mark.venv
@pytest.mark.other_python
def test_an_interpreter_outside_a_venv_is_restored_in_place(
    bundle: tuple[Path, FakeIndex],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """A system Python cannot be replaced by a new venv: doctor's fix syncs it
    --in-place, and restore's default for a new venv says how to."""
    folder, _ = bundle
    system = Path(find_python("3.10", None))
    assert not (system.parent.parent / "pyvenv.cfg").exists()
    captured_at(folder, None, system)
    code = main(["doctor", "--lock", str(folder), "--allow-cpu", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["interpreter"]["chosen_by"] == "captured"
    fixes = {f["fix"] for f in doc["findings"] if f["status"] == "FAIL"}
    assert f"envlock restore {folder} --venv {system} --in-place --allow-cpu" in fixes
    # a plain restore would build DIR/.venv: it says so and names the in-place way
    # (stopped before building: --offline with nothing to install from)
    assert main(["restore", str(folder), "--offline", "--allow-cpu"]) == 2
    err = capsys.readouterr().err
    assert (
        f"no --venv given: {folder / '.venv'}, the venv bootstrap.sh makes; {folder} was "
        f"captured from {system}, outside a venv (to restore into it: envlock restore "
        f"{folder} --venv {system} --in-place)"
    ) in err


def test_the_dangling_interpreter_of_a_captured_venv_is_the_finding(
    bundle: tuple[Path, FakeIndex],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    folder, _ = bundle
    venv = tmp_path / "gone"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /nowhere\n")
    (venv / "bin" / "python").symlink_to("/nowhere/python3.10")
    captured_at(folder, venv, venv / "bin" / "python")
    assert main(["doctor", "--lock", str(folder), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [f["fix"] for f in doc["findings"]] == [f"envlock restore {folder} --venv {venv}"]
    assert "interpreter" not in doc  # nothing else (envlock's own Python) was inspected


@pytest.mark.venv
@pytest.mark.other_python
def test_a_kernel_restore_never_defaults_to_the_captured_venv(
    bundle: tuple[Path, FakeIndex],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """--kernel makes a new kernel beside the one running from the captured venv:
    replacing that venv under the running kernel is not what it asks for."""
    folder, _ = bundle
    venv = project_venv(tmp_path)
    captured_at(folder, venv, venv / "bin" / "python")
    # the lock has no ipykernel, so --kernel is refused before anything is built
    assert main(["restore", str(folder), "--kernel", "tf215", "--allow-cpu"]) == 2
    err = capsys.readouterr().err
    assert (
        f"no --venv given: {folder / '.venv'}, the venv bootstrap.sh makes (not {venv}, which "
        f"{folder} was captured from: a running kernel may use it; --kernel registers a new "
        "venv beside it)"
    ) in err
    assert not venv.is_symlink() and (venv / "pyvenv.cfg").is_file()


@pytest.mark.venv
@pytest.mark.other_python
def test_a_forged_captured_json_is_shown_never_acted_on(
    bundle: tuple[Path, FakeIndex],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """Issue 38, break 2: a captured.json that names this machine's digest (public:
    hostname and /etc/machine-id) but carries no MAC of this user's key, as anyone
    who can write the bundle folder can make one. Before, `restore DIR --in-place`
    with no --venv synced the environment it named. Now it is a hint: restore and
    doctor act on what they would without it, and say how to name it on purpose."""
    folder, _ = bundle
    venv = project_venv(tmp_path)
    forged = {
        "schema": 1,
        "interpreter": str(venv / "bin" / "python"),
        "venv": str(venv),
        "python": "3.10.13",
        "platform": "Linux x86_64, glibc 2.36",
        "machine": origin.machine_id(),
    }
    (folder / origin.FILE).write_text(json.dumps(forged))
    before = sorted(str(p) for p in venv.rglob("*"))
    note = (
        f"{folder / origin.FILE} names {venv}, but this user's envlock did not write it "
        f"here (its MAC does not match), so it is not used; to act on that environment, "
        f"pass --venv {venv}"
    )
    assert main(["restore", str(folder), "--in-place", "--allow-cpu"]) == 2
    err = capsys.readouterr().err
    assert f"no --venv given: {folder / '.venv'}, the venv bootstrap.sh makes ({note})" in err
    assert sorted(str(p) for p in venv.rglob("*")) == before  # not synced
    assert main(["doctor", "--lock", str(folder), "--allow-cpu", "--json"]) in (0, 1)
    doc = json.loads(capsys.readouterr().out)
    assert doc["interpreter"]["chosen_by"] in ("envlock", "VIRTUAL_ENV")  # not "captured"
    assert doc["interpreter"]["reason"].endswith(f" ({note})")
    # the note's way to act on it on purpose works as it says
    assert (
        main(["doctor", "--lock", str(folder), "--allow-cpu", "--json", "--venv", str(venv)]) == 1
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["interpreter"]["python"] == str(venv / "bin" / "python")
