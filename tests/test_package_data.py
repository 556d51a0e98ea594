"""envlock's data under one roof (issue 44): the matrices, the templates and the
known errors live in ``envlock/data/``, are read from there only
(``envlock.resources``) and ship in the wheel as package data."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from envlock import resources
from envlock.cli import main
from envlock.doctor import knownerrors
from envlock.matrix import cache as matrix_cache

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "envlock" / "data"


def data_files() -> list[str]:
    """Every file under envlock/data/ as a wheel names it (envlock/data/...)."""
    return sorted(
        path.relative_to(REPO).as_posix()
        for path in DATA.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    )


def test_the_data_lives_in_one_folder_of_the_package() -> None:
    files = data_files()
    assert "envlock/data/known_errors.toml" in files
    assert "envlock/data/matrices/tensorflow.toml" in files
    assert "envlock/data/templates/Dockerfile.j2" in files
    # nothing else: the matrices, the templates and the known errors
    assert {f.split("/")[2] for f in files} == {"known_errors.toml", "matrices", "templates"}
    # no second copy at the top of the checkout, nor beside the doctor's module
    assert not (REPO / "matrices").exists()
    assert not (REPO / "templates").exists()
    assert not (REPO / "envlock" / "doctor" / "known_errors.toml").exists()


def test_the_loader_reads_envlock_data() -> None:
    assert Path(str(resources.data_dir("matrices"))) == DATA / "matrices"
    assert Path(str(resources.data_dir("templates"))) == DATA / "templates"
    assert (
        resources.read_bytes("matrices", "cuda.toml")
        == (DATA / "matrices" / "cuda.toml").read_bytes()
    )
    env = resources.template_environment()
    assert env.loader.get_source(env, "dockerignore.j2")[0] == (
        DATA / "templates" / "dockerignore.j2"
    ).read_text(encoding="utf-8")
    # the known errors and the matrix cache's stamp read the same folder
    assert len(knownerrors.load()) >= 1
    assert matrix_cache.matrix_folder() == str(DATA / "matrices")


def test_matrix_refresh_writes_the_package_data_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without -o, ``envlock matrix refresh`` writes the matrix the loader reads:
    envlock/data/matrices/ in a checkout (here a copy of it, so the test leaves
    the checkout as it is)."""
    folder = tmp_path / "matrices"
    shutil.copytree(DATA / "matrices", folder)
    monkeypatch.setattr(resources, "data_dir", lambda _name: folder)
    before = (folder / "tensorflow.toml").read_bytes()
    assert main(["matrix", "refresh", "--notes-only", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["output"] == str(folder / "tensorflow.toml")
    # the shipped file already carries its notes: rewritten to the same bytes
    assert (folder / "tensorflow.toml").read_bytes() == before


@pytest.mark.network  # pip builds in an isolated environment: hatchling from the index
@pytest.mark.venv
def test_a_built_wheel_holds_every_data_file(tmp_path: Path) -> None:
    out = tmp_path / "wheel"
    run = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    missing = [f for f in data_files() if f not in names]
    assert missing == []
    # the data ships once, under envlock/data/ only
    assert not [n for n in names if n.startswith(("envlock/matrices/", "envlock/templates/"))]
    assert "envlock/doctor/known_errors.toml" not in names
