"""The reads tests/test_bounded_reads.py listed as "to move", moved (issue #38).

Each file below was read with ``open()``/``Path.read_bytes()``/``read_text()``:
a FIFO there hung the command, ``/dev/zero`` or a sparse file filled memory,
and an unreadable file read as "absent" in some places. Each now goes through
``envlock.readers`` (``read_bytes``, ``read_optional``) with a cap suited to
the file; a file that is there but cannot be read is an error naming it (exit 2
for the user's input, exit 3 for envlock's own state), never a traceback, a
hang, or "missing".

``_within`` runs a call in a thread and fails the test when it has not returned
after a few seconds: that is what the old code did on a FIFO.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from envlock.cli import main
from envlock.errors import EnvironmentFailure, EnvlockError, UsageError

MiB = 1024 * 1024


def _within(call: Callable[[], Any], seconds: float = 5.0) -> Any:
    """``call()``'s result or its EnvlockError; a test failure when it hangs."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except EnvlockError as e:
            box["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still reading after {seconds} s (a FIFO was opened)"
    return box.get("error", box.get("value"))


def _sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


# ------------------------------------------------------------ the Dockerfile


@pytest.mark.parametrize("kind", ["fifo", "sparse", "folder"])
def test_build_refuses_a_dockerfile_that_is_a_fifo_huge_or_a_folder_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """envlock build DIR (image/dockerfile.py): a FIFO Dockerfile read "no Dockerfile in
    this folder" (is_file() is false for it), and one over 1 MiB was read whole;
    now each is exit 2 naming what it is, before the engine is asked."""
    dockerfile = tmp_path / "Dockerfile"
    if kind == "fifo":
        _fifo(dockerfile)
        problem = "not a regular file (a FIFO)"
    elif kind == "sparse":
        _sparse(dockerfile, 65 * MiB)
        problem = f"{65 * MiB} bytes, more than the {MiB} allowed"
    else:
        dockerfile.mkdir()
        problem = "is a folder, not a file"
    code = _within(lambda: main(["build", str(tmp_path)]))
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"envlock: error: {dockerfile}: {problem}\n"), err
    assert "Traceback" not in err


def test_ci_build_checks_a_cells_dockerfile_without_waiting_on_a_fifo(tmp_path: Path) -> None:
    """ci/build.py check_cell read the cell's Dockerfile with read_text: a FIFO hung."""
    from envlock.ci.build import check_cell
    from envlock.ci.options import CiBuildOptions

    _fifo(tmp_path / "Dockerfile")
    error = _within(lambda: check_cell(tmp_path, CiBuildOptions()))
    assert isinstance(error, UsageError) and error.exit_code == 2
    assert error.message == f"{tmp_path / 'Dockerfile'}: not a regular file (a FIFO)"


# ------------------------------------------------------------ ci build's reuse


def test_reuse_tells_a_missing_summary_from_one_it_cannot_read(tmp_path: Path) -> None:
    """ci/reuse.py previous_cells: an absent summary.json is "build every cell"; one
    that is a FIFO hung, and one over the cap was read whole (both read as absent
    when they raised). Now: {} only when absent or not this schema's summary."""
    from envlock.ci.reuse import MAX_SUMMARY, previous_cells
    from envlock.ci.summary import SCHEMA, SUMMARY_NAME

    summary = tmp_path / SUMMARY_NAME
    assert previous_cells(tmp_path) == {}
    summary.write_text(json.dumps({"schema": SCHEMA, "cells": [{"cell": "a", "x": 1}]}))
    assert previous_cells(tmp_path) == {"a": {"cell": "a", "x": 1}}
    summary.write_text("{not json")
    assert previous_cells(tmp_path) == {}  # not a summary: every cell is built again
    summary.unlink()
    _fifo(summary)
    error = _within(lambda: previous_cells(tmp_path))
    assert isinstance(error, UsageError) and error.exit_code == 2
    assert error.message == f"the last run's {summary}: not a regular file (a FIFO)"
    assert error.hint == f"remove {summary} to build every cell again"
    summary.unlink()
    _sparse(summary, MAX_SUMMARY + 1)
    error = _within(lambda: previous_cells(tmp_path))
    assert isinstance(error, UsageError)
    assert error.message.endswith(f"more than the {MAX_SUMMARY} allowed")


def test_a_dockerignore_that_cannot_be_read_is_named_not_skipped(tmp_path: Path) -> None:
    """ci/reuse.py cell_inputs: a .dockerignore that is a FIFO was skipped (is_file()
    false), so the cell's inputs were hashed without its patterns; now exit 2."""
    pytest.importorskip("docker")
    from envlock.ci.options import CiBuildOptions
    from envlock.ci.reuse import cell_inputs

    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / "data.txt").write_text("x\n")
    first = cell_inputs(tmp_path, CiBuildOptions())
    assert first.startswith("sha256:")
    (tmp_path / ".dockerignore").write_text("data.txt\n")
    assert cell_inputs(tmp_path, CiBuildOptions()) != first  # its patterns count
    (tmp_path / ".dockerignore").unlink()
    _fifo(tmp_path / ".dockerignore")
    error = _within(lambda: cell_inputs(tmp_path, CiBuildOptions()))
    assert isinstance(error, UsageError) and error.exit_code == 2
    assert error.message == f"{tmp_path / '.dockerignore'}: not a regular file (a FIFO)"


# ------------------------------------------------------------ ci init -o


def test_ci_init_compares_an_existing_output_without_waiting_on_a_fifo(tmp_path: Path) -> None:
    """ci/workflow.py write_files read the file -o names to compare it: a FIFO hung."""
    from envlock.ci.workflow import MAX_WORKFLOW, write_files

    fifo = _fifo(tmp_path / "wf.yml")
    error = _within(lambda: write_files({fifo: b"jobs: {}\n"}))
    assert isinstance(error, UsageError) and error.exit_code == 2
    assert error.message == f"-o {fifo}: not a regular file (a FIFO)"
    assert error.hint == "give --force to replace it, or -o another path"
    big = _sparse(tmp_path / "big.yml", MAX_WORKFLOW + 1)
    error = _within(lambda: write_files({big: b"jobs: {}\n"}))
    assert isinstance(error, UsageError)
    assert (
        error.message == f"-o {big}: {MAX_WORKFLOW + 1} bytes, more than the {MAX_WORKFLOW} allowed"
    )
    same = tmp_path / "same.yml"
    same.write_bytes(b"jobs: {}\n")
    write_files({same: b"jobs: {}\n"})  # the same bytes: no refusal
    write_files({tmp_path / "new.yml": b"jobs: {}\n"})
    assert (tmp_path / "new.yml").read_bytes() == b"jobs: {}\n"


# ------------------------------------------------------------ bundle files


def test_lock_check_tells_a_missing_bundle_file_from_one_it_cannot_read(tmp_path: Path) -> None:
    """bundle/check.py compare_files: a FIFO hung `lock --check`; a folder or an
    unreadable file read as "missing". Now missing only when absent."""
    from envlock.bundle.check import compare_files

    (tmp_path / "same.txt").write_bytes(b"a")
    rows = compare_files(tmp_path, {"same.txt": b"a", "gone.txt": b"b"})
    assert [r["state"] for r in rows] == ["same", "missing"]
    _fifo(tmp_path / "Dockerfile")
    error = _within(lambda: compare_files(tmp_path, {"Dockerfile": b"FROM x\n"}))
    assert isinstance(error, UsageError) and error.exit_code == 2
    assert error.message == f"{tmp_path / 'Dockerfile'}: not a regular file (a FIFO)"
    (tmp_path / "dir.txt").mkdir()
    error = _within(lambda: compare_files(tmp_path, {"dir.txt": b"b"}))
    assert isinstance(error, UsageError)
    assert error.message == f"{tmp_path / 'dir.txt'}: is a folder, not a file"


def test_render_refuses_a_lock_file_that_is_a_fifo_or_a_link_to_a_device(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bundle/folder.py _lock_bytes (envlock render DIR): pylock.toml as a FIFO hung,
    a link to /dev/zero filled memory; now exit 2 naming it."""
    _fifo(tmp_path / "pylock.toml")
    code = _within(lambda: main(["render", str(tmp_path)]))
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(
        f"envlock: error: {tmp_path / 'pylock.toml'}: not a regular file (a FIFO)"
    )
    (tmp_path / "pylock.toml").unlink()
    (tmp_path / "pylock.toml").symlink_to("/dev/zero")
    code = _within(lambda: main(["render", str(tmp_path)]))
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(
        f"envlock: error: {tmp_path / 'pylock.toml'}: not a regular file (a device)"
    )
    (tmp_path / "pylock.toml").unlink()
    code = main(["render", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "is not an envlock bundle" in err, err


def test_lock_reads_runtime_json_as_absent_or_refuses_it(tmp_path: Path) -> None:
    """bundle/folder.py _input_bytes: runtime.json read as None (absent) when it
    could not be read; now None only when absent."""
    from envlock.bundle.folder import _input_bytes

    assert _input_bytes(tmp_path, ("runtime.json",)) == {"runtime.json": None}
    (tmp_path / "runtime.json").write_text("{}")
    assert _input_bytes(tmp_path, ("runtime.json",)) == {"runtime.json": b"{}"}
    (tmp_path / "runtime.json").unlink()
    _fifo(tmp_path / "runtime.json")
    error = _within(lambda: _input_bytes(tmp_path, ("runtime.json",)))
    assert isinstance(error, UsageError)
    assert error.message == f"{tmp_path / 'runtime.json'}: not a regular file (a FIFO)"


# ------------------------------------------------------------ restore's switch journal


def test_a_switch_journal_that_cannot_be_read_is_exit_3_and_kept(tmp_path: Path) -> None:
    """venv/venvlink.py recover: a journal that could not be read (a FIFO hung; a
    folder, a file over the cap or without permission) was dropped as if it were
    damaged, losing the record of an interrupted switch. Now: exit 3 naming it, the
    journal left where it is; a link is not read through; absent is nothing to do."""
    from envlock.venv.venvlink import MAX_JOURNAL, journal_path, recover

    venv = tmp_path / "env"
    (tmp_path / "env.envlock-1").mkdir()
    journal = journal_path(venv)
    assert recover(venv) == []  # absent: nothing to finish
    _fifo(journal)
    error = _within(lambda: recover(venv))
    assert isinstance(error, EnvironmentFailure) and error.exit_code == 3
    assert error.message == f"restore's switch journal {journal}: not a regular file (a FIFO)"
    assert error.hint is not None and f"rm {journal}" in error.hint
    assert journal.exists()
    journal.unlink()
    _sparse(journal, MAX_JOURNAL + 1)
    error = _within(lambda: recover(venv))
    assert isinstance(error, EnvironmentFailure) and journal.exists()
    journal.unlink()
    real = tmp_path / "elsewhere.json"
    real.write_text(json.dumps({"to": "env.envlock-1"}))
    journal.symlink_to(real)
    error = _within(lambda: recover(venv))
    assert isinstance(error, EnvironmentFailure)
    assert error.message == (
        f"restore's switch journal {journal}: a symbolic link (to {real}); envlock does not "
        "read through it"
    )
    assert not os.path.lexists(venv)  # nothing was switched on the link's word
    journal.unlink()
    journal.write_text(json.dumps({"to": "env.envlock-1"}))  # a real one is honoured
    assert recover(venv) == [f"finished an interrupted switch: {venv} -> env.envlock-1"]
    assert os.readlink(venv) == "env.envlock-1" and not os.path.lexists(journal)


# ------------------------------------------------------------ kernelspecs

_FAKE_IPYKERNEL = """#!/bin/sh
# stands in for VENV/bin/python: `-c CODE` prints the data dir; `-m ipykernel install`
# writes a kernelspec as jupyter_client does (mkdir -p, then the file), through links
if [ "$1" = "-c" ]; then echo "$JUPYTER_DATA_DIR"; exit 0; fi
name=$5; shift 7
if [ "$1" = "--prefix" ]; then dest="$2/share/jupyter/kernels/$name"
else dest="$JUPYTER_DATA_DIR/kernels/$name"; fi
mkdir -p "$dest" && printf '{"argv": ["python"], "display_name": "x"}' > "$dest/kernel.json"
echo "Installed kernelspec $name in $dest"
"""


def _fake_venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(_FAKE_IPYKERNEL)
    python.chmod(0o755)
    return venv


@pytest.mark.other_python  # the stand-in for a venv's python
@pytest.mark.parametrize("where", ["user", "prefix"])
def test_a_kernelspec_is_never_installed_through_a_planted_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """venv/kernel.py: `restore --kernel` let ipykernel write through a link planted
    at `kernels` (jupyter_client removes kernels/NAME, then copies into it: a
    shared --prefix environment's link could point anywhere), and read kernel.json
    through a link. Now a link at share/jupyter, kernels or kernels/NAME is exit 3
    before anything is written, and kernel.json is read only as a regular file."""
    from envlock.venv.install import RestoreRequest
    from envlock.venv.kernel import install_kernel

    venv = _fake_venv(tmp_path)
    data = tmp_path / "data" / "jupyter"
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))
    prefix = tmp_path / "shared-env"
    req = RestoreRequest(
        bundle=tmp_path / "env",
        venv=venv,
        kernel="tf215",
        kernel_prefix=prefix if where == "prefix" else None,
    )
    kernels = (prefix / "share" / "jupyter" if where == "prefix" else data) / "kernels"
    spec = install_kernel(req, venv, "tf215")  # no link: installed and read back
    assert spec["path"] == str(kernels / "tf215") and spec["argv"] == ["python"]
    # a link planted at `kernels`, to a folder of the victim's
    victim = tmp_path / "victim"
    (victim / "tf215").mkdir(parents=True)
    (victim / "tf215" / "notes.txt").write_text("mine\n")
    import shutil

    shutil.rmtree(kernels)
    kernels.symlink_to(victim)
    with pytest.raises(EnvironmentFailure) as info:
        install_kernel(req, venv, "tf215")
    assert info.value.exit_code == 3
    assert info.value.message == (
        f"--kernel tf215: {kernels} is a symbolic link (to {victim}); envlock does not "
        "install a kernelspec through it, nothing was written"
    )
    assert sorted(p.name for p in (victim / "tf215").iterdir()) == ["notes.txt"]
    # a link at kernels/NAME
    kernels.unlink()
    kernels.mkdir()
    (kernels / "tf215").symlink_to(victim / "tf215")
    with pytest.raises(EnvironmentFailure, match="is a symbolic link"):
        install_kernel(req, venv, "tf215")
    assert sorted(p.name for p in (victim / "tf215").iterdir()) == ["notes.txt"]


@pytest.mark.other_python
def test_a_kernel_json_that_is_a_link_is_not_read(tmp_path: Path) -> None:
    """The kernel.json ipykernel reports is read with O_NOFOLLOW: a link is exit 3."""
    from envlock.venv.install import RestoreRequest
    from envlock.venv.kernel import install_kernel

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    spec = tmp_path / "spec"
    spec.mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text('{"argv": ["secret"]}')
    (spec / "kernel.json").symlink_to(secret)
    python = venv / "bin" / "python"
    python.write_text(
        f'#!/bin/sh\n[ "$1" = "-c" ] && exit 1\necho "Installed kernelspec k in {spec}"\n'
    )
    python.chmod(0o755)
    req = RestoreRequest(bundle=tmp_path, venv=venv, kernel="k")
    with pytest.raises(EnvironmentFailure) as info:
        install_kernel(req, venv, "k")
    assert info.value.message == (
        f"the kernelspec {spec / 'kernel.json'}: a symbolic link (to {secret}); envlock does "
        "not read through it"
    )


def test_restores_smoke_test_tells_absent_runtime_settings_from_unreadable(tmp_path: Path) -> None:
    """venv/restore.py smoke: a runtime.json that was a FIFO or a folder read as
    absent (is_file() false), and the smoke test ran without the bundle's runtime
    settings; now exit 2 naming it, before anything runs."""
    from envlock.venv.install import RestoreRequest
    from envlock.venv.restore import smoke

    _fifo(tmp_path / "runtime.json")
    req = RestoreRequest(bundle=tmp_path, venv=tmp_path / "venv")
    error = _within(lambda: smoke(req, Path("/nonexistent/python")))
    assert isinstance(error, UsageError) and error.exit_code == 2
    assert error.message == (
        f"runtime settings {tmp_path / 'runtime.json'}: not a regular file (a FIFO)"
    )


# ------------------------------------------------------------ the bundle's manifest and journal


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("envlock-manifest.json", "fifo"),
        ("envlock-manifest.json", "sparse"),
        ("envlock-manifest.json", "link"),
        (".envlock-journal.json", "fifo"),
        (".envlock-journal.json", "link"),
    ],
)
def test_a_bundles_manifest_or_journal_that_is_a_fifo_huge_or_a_link_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, kind: str
) -> None:
    """bundle/manifest.py read both with Path.read_bytes(): a FIFO hung every
    command that opens the bundle (render, lock --check, build, verify --lock), a
    sparse file was read whole, a link was followed out of the folder. A bundle
    folder is input (a colleague's, a pull request's): now each is exit 2 naming
    the file and what it is."""
    from envlock.bundle.manifest import read_manifest, recover_bundle

    target = tmp_path / name
    if kind == "fifo":
        _fifo(target)
        problem = "not a regular file (a FIFO)"
    elif kind == "sparse":
        _sparse(target, 2 * MiB)
        problem = f"{2 * MiB} bytes, more than the {MiB} allowed"
    else:
        (tmp_path / "elsewhere.json").write_text("{}")
        target.symlink_to(tmp_path / "elsewhere.json")
        problem = "a symbolic link"
    read = read_manifest if name == "envlock-manifest.json" else recover_bundle
    err = _within(lambda: read(tmp_path))
    assert isinstance(err, UsageError), err
    assert str(err).startswith(f"{target}: ") and problem in str(err)
    assert err.exit_code == 2
