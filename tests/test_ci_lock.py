"""envlock ci lock: one bundle per cell through lock_folder, several at once,
all-or-nothing per cell, then cells.json and docker-bake.json."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fixtures.index.fakeindex import FakeIndex

from envlock.bundle.folder import LockedFolder, LockRequest
from envlock.ci.cells import bake_target, cell_id, expand
from envlock.ci.evidence import OUTPUT_NAMES as CI_BUILD_OUTPUTS
from envlock.ci.lockcells import lock_cells
from envlock.cli import main
from envlock.errors import EnvironmentFailure
from envlock.lock import read_lock
from envlock.model import Constraints

SPEC = "tensorflow>=2.14,<2.16"
IDS = [
    "tf2.14.1-py3.10-cuda11.8",
    "tf2.14.1-py3.11-cuda11.8",
    "tf2.15.1-py3.10-cuda12.2",
    "tf2.15.1-py3.11-cuda12.2",
]
BROKEN = "tf2.15.1-py3.10-cuda12.2"  # the index has no cp310 wheel of 2.15.1


def _tf_index(idx: FakeIndex) -> FakeIndex:
    """Tiny 'tensorflow' 2.14.1 (cp310, cp311) and 2.15.1 (cp311 only) wheels."""
    for tag in ("cp310-cp310", "cp311-cp311"):
        idx.add_dist(
            "tensorflow", "2.14.1", tag=f"{tag}-manylinux_2_17_x86_64", requires=("dep-a>=1",)
        )
    idx.add_dist("tensorflow", "2.15.1", tag="cp311-cp311-manylinux_2_17_x86_64")
    idx.add_dist("dep-a", "1.0")
    return idx


@pytest.fixture()
def tf_index(make_index: Callable[..., FakeIndex]) -> FakeIndex:
    return _tf_index(make_index())


@pytest.fixture(scope="module")
def locked(
    make_module_index: Callable[..., FakeIndex], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, int, dict[str, Any], str]:
    """One `envlock ci lock` of the four cells (one failing), shared by the tests that read it."""
    import contextlib
    import io

    tmp = tmp_path_factory.mktemp("ci-lock")
    index = _tf_index(make_module_index())
    out = tmp / "cells"
    stdout, stderr = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UV_CACHE_DIR", str(tmp / "uv-cache"))
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(
                ["ci", "lock", SPEC, "--python", "3.10,3.11", "-o", str(out)]
                + ["--index-url", index.url, "--json"]
            )
    return out, code, json.loads(stdout.getvalue()), stderr.getvalue()


@pytest.fixture()
def uv_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))


def _ci_lock(
    capsys: pytest.CaptureFixture[str], out: Path, index: FakeIndex, *extra: str
) -> tuple[int, dict[str, Any], str]:
    code = main(
        ["ci", "lock", SPEC, "--python", "3.10,3.11", "-o", str(out)]
        + ["--index-url", index.url, "--json", *extra]
    )
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_cells_land_and_a_failed_cell_is_named(
    locked: tuple[Path, int, dict[str, Any], str],
) -> None:
    out, code, report, err = locked
    assert code == 1
    assert [c["id"] for c in report["cells"]] == IDS
    status = {c["id"]: c["status"] for c in report["cells"]}
    assert status == {i: ("failed" if i == BROKEN else "locked") for i in IDS}
    assert f"cell {BROKEN} failed" in err and "Traceback" not in err
    broken = next(c for c in report["cells"] if c["id"] == BROKEN)
    assert "2.15.1" in broken["error"]
    # all or nothing: the failed cell wrote nothing, the others a whole bundle
    assert not (out / BROKEN).exists() or not any((out / BROKEN).iterdir())
    for cid in IDS:
        if cid == BROKEN:
            continue
        pylock = (out / cid / "pylock.toml").read_bytes()
        assert (out / cid / "Dockerfile").is_file()
        assert (out / cid / "requirements.txt").is_file()
        digest = "sha256:" + hashlib.sha256(pylock).hexdigest()
        row = next(c for c in report["cells"] if c["id"] == cid)
        assert row["lock_digest"] == digest
        assert f'io.envlock.lock.digest="{digest}"' in (out / cid / "Dockerfile").read_text()
    # cells.json holds every cell, the same rows as --json
    cells_json = json.loads((out / "cells.json").read_text())
    assert cells_json["spec"] == SPEC and cells_json["cells"] == report["cells"]


def test_bake_file_contexts_tags_and_lock_digests(
    locked: tuple[Path, int, dict[str, Any], str],
) -> None:
    out = locked[0]
    bake = json.loads((out / "docker-bake.json").read_text())
    landed = [i for i in IDS if i != BROKEN]
    assert bake["group"]["default"]["targets"] == [bake_target(i) for i in landed]
    assert list(bake["target"]) == [bake_target(i) for i in landed]
    tags: list[str] = []
    for cid in landed:
        target = bake["target"][bake_target(cid)]
        assert target["context"] == cid  # relative to the bake file: cd DIR && buildx bake
        context = out / target["context"]
        assert context.is_dir()
        assert (context / target["dockerfile"]).is_file()
        pylock = (context / "pylock.toml").read_bytes()
        want = "sha256:" + hashlib.sha256(pylock).hexdigest()
        assert target["labels"]["io.envlock.lock.digest"] == want
        assert target["labels"]["io.envlock.cell"] == cid
        tags += target["tags"]
    assert len(tags) == len(set(tags)) == len(landed)


def test_bake_file_passes_buildx_print(locked: tuple[Path, int, dict[str, Any], str]) -> None:
    docker = shutil.which("docker")
    have = docker is not None and (
        subprocess.run(
            [docker, "buildx", "version"], capture_output=True, check=False, timeout=30
        ).returncode
        == 0
    )
    if not have:
        pytest.skip("docker buildx is not installed here (Debian 12 ships none)")
    assert docker is not None
    out = locked[0]
    proc = subprocess.run(  # as docs/ci-matrix.md says: cd DIR && docker buildx bake
        [docker, "buildx", "bake", "--print"],
        cwd=out,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert set(printed["target"]) == {bake_target(i) for i in IDS if i != BROKEN}


@pytest.mark.usefixtures("uv_cache")
def test_a_cell_is_the_bundle_envlock_lock_writes(
    tf_index: FakeIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cells"
    code = main(
        ["ci", "lock", "tensorflow==2.14", "--python", "3.11", "-o", str(out)]
        + ["--index-url", tf_index.url]
    )
    capsys.readouterr()
    assert code == 0
    single = tmp_path / "single"
    code = main(
        ["lock", "tensorflow==2.14.1", "--python", "3.11"]  # listed: asked; the source: not
        + ["--index-url", tf_index.url, "-o", str(single), "--json"]
    )
    files = json.loads(capsys.readouterr().out)["files"]
    assert code == 0 and "pylock.toml" in files and "Dockerfile" in files
    cell = out / "tf2.14.1-py3.11-cuda11.8"
    for name in files:
        assert (cell / name).read_bytes() == (single / name).read_bytes(), name
    # and lock --check accepts the cell's bundle as current
    assert main(["lock", "--check", str(cell), "--index-url", tf_index.url]) == 0
    capsys.readouterr()
    # a second run over the same folder writes the same bytes
    before = {p.name: p.read_bytes() for p in cell.iterdir() if p.is_file()}
    code = main(
        ["ci", "lock", "tensorflow==2.14", "--python", "3.11", "-o", str(out)]
        + ["--index-url", tf_index.url]
    )
    capsys.readouterr()
    assert code == 0
    assert {p.name: p.read_bytes() for p in cell.iterdir() if p.is_file()} == before


def test_cells_run_at_once_and_one_failure_does_not_stop_the_others(tmp_path: Path) -> None:
    cells = expand("tensorflow>=2.14,<2.17").cells + expand("tensorflow==2.13").cells
    assert len(cells) == 4
    barrier = threading.Barrier(4, timeout=20)  # passes only when 4 cells run together
    done: list[str] = []

    def fake_lock(request: LockRequest, resolution: Any, progress: Any) -> LockedFolder:
        barrier.wait()
        assert request.output == tmp_path / cell_id(resolution)
        assert request.spec == f"tensorflow=={resolution.version}"
        # cells from resolve's defaults ask for no Python or CUDA source (resolve chooses)
        assert request.constraints.python is None and request.constraints.cuda_source is None
        if resolution.version == "2.15.1":
            raise EnvironmentFailure("the index could not be reached", hint="check the network")
        done.append(resolution.version)
        fake: Any = _FakeLock()
        return LockedFolder(lock=fake, folder=request.output, files=(), digest="ab")

    lines: list[str] = []
    results = lock_cells(
        cells,
        tmp_path,
        LockRequest(Constraints(), output=tmp_path, index_url="http://127.0.0.1:9/simple"),
        jobs=4,
        progress=lines.append,
        lock_one=fake_lock,
    )
    assert [r.cell.id for r in results] == [c.id for c in cells]
    assert [r.ok for r in results] == [r.cell.version != "2.15.1" for r in results]
    failed = next(r for r in results if not r.ok)
    assert failed.error == "the index could not be reached (hint: check the network)"
    assert sorted(done) == ["2.13.1", "2.14.1", "2.16.2"]
    assert len(lines) == 5 and any(re.search(r"\[\d/4\] tf2\.15\.1.*FAILED", x) for x in lines)


class _FakeLock:
    packages = ("a", "b")


def test_bad_jobs_and_output_are_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ci", "lock", SPEC, "-o", str(tmp_path / "x"), "--jobs", "0"]) == 2
    assert "--jobs" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert main(["ci", "lock", SPEC, "-o", str(tmp_path / "file")]) == 2
    assert "Traceback" not in capsys.readouterr().err


# ---------------------------------------------------------------- ci lock --check


def _check(
    capsys: pytest.CaptureFixture[str], folder: Path, index: FakeIndex
) -> tuple[int, Any, str]:
    code = main(["ci", "lock", "--check", str(folder), "--index-url", index.url, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_check_passes_on_its_own_output_and_names_the_cells_that_would_change(
    tmp_path: Path,
    tf_index: FakeIndex,
    uv_cache: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "cells"
    code, report, err = _ci_lock(capsys, out, tf_index, "--python", "3.11")
    assert code == 0, err
    ids = ["tf2.14.1-py3.11-cuda11.8", "tf2.15.1-py3.11-cuda12.2"]
    assert [c["id"] for c in report["cells"]] == ids
    recorded = json.loads((out / "cells.json").read_text())["input"]
    assert recorded == {"spec": SPEC, "python": "3.11"}
    # what `ci build` writes into a cell's folder (smoke result and log, the report, the
    # SBOM and its signed statement) are not files lock writes: a cell stays current
    for made in ids:
        for output in sorted(CI_BUILD_OUTPUTS):
            (out / made / output).write_text(f"written by ci build: {output}\n")
    code, result, err = _check(capsys, out, tf_index)
    assert code == 0, err
    assert result["ok"] and [(c["id"], c["state"]) for c in result["cells"]] == [
        (i, "current") for i in ids
    ]
    assert "all 2 cells" in err
    # a newer dependency on the index: the cell that requires it would change, by name
    tf_index.add_dist("dep-a", "1.1")
    code, result, err = _check(capsys, out, tf_index)
    assert code == 1
    states = {c["id"]: c for c in result["cells"]}
    assert states[ids[0]]["state"] == "changed"
    assert "~ dep-a 1.0 -> 1.1" in states[ids[0]]["changes"][0]
    assert states[ids[1]]["state"] == "current"  # 2.15.1 requires nothing
    assert f"1 of 2 cells would change: {ids[0]} (changed)" in err
    fix = f"envlock ci lock '{SPEC}' --python 3.11 -o {out} --force"
    assert result["fix"] == fix and f"hint: {fix}" in err
    # a cell folder removed by hand is named too
    shutil.rmtree(out / ids[1])
    code, result, err = _check(capsys, out, tf_index)
    assert code == 1 and "(failed)" in err and ids[1] in err


def test_check_reuses_the_recorded_exclude_newer(
    tmp_path: Path,
    tf_index: FakeIndex,
    uv_cache: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from dataclasses import replace as dc_replace

    from fixtures.index.fakeindex import make_dist

    out = tmp_path / "cells"
    argv = ["--python", "3.11", "--exclude-newer", "2025-06-30"]
    code, report, err = _ci_lock(capsys, out, tf_index, *argv)
    assert code == 0, err
    recorded = json.loads((out / "cells.json").read_text())["input"]
    assert recorded["exclude_newer"] == "2025-06-30T00:00:00Z"  # a date: the start of it, UTC
    pylock = (out / "tf2.14.1-py3.11-cuda11.8" / "pylock.toml").read_text()
    assert "2025-06-30T00:00:00Z" in pylock  # each lock records the instant too
    # dep-a 1.1 uploaded after the instant: the check (which reuses it) still passes
    tf_index.add(dc_replace(make_dist("dep-a", "1.1"), upload_time="2025-09-01T00:00:00Z"))
    code, result, err = _check(capsys, out, tf_index)
    assert code == 0, err
    # --check takes no new instant: it reuses the recorded one
    code = main(["ci", "lock", "--check", str(out), "--exclude-newer", "2026-01-01"])
    err = capsys.readouterr().err
    assert code == 2 and "--exclude-newer not used" in err and "Traceback" not in err


def test_check_of_a_folder_without_cells_json_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ci", "lock", "--check", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "cells.json: no such file" in err and "Traceback" not in err
    assert main(["ci", "lock", SPEC, "--check", str(tmp_path)]) == 2
    assert "SPEC" in capsys.readouterr().err


def test_matrix_from_lists_the_locked_cells(
    locked: tuple[Path, int, dict[str, Any], str], capsys: pytest.CaptureFixture[str]
) -> None:
    out = locked[0]
    assert main(["ci", "matrix", "--from", str(out), "--format", "github"]) == 0
    text = capsys.readouterr().out
    assert text.count("\n") == 1
    include = json.loads(text)["include"]
    assert [c["id"] for c in include] == [i for i in IDS if i != BROKEN]
    assert set(include[0]) == {
        "id",
        "spec",
        "version",
        "python",
        "cuda",
        "cudnn",
        "cuda_source",
        "base_image",
        "image_tag",
    }
    assert main(["ci", "matrix", SPEC, "--from", str(out)]) == 2
    assert "not used" in capsys.readouterr().err


def test_check_names_a_cell_whose_lock_had_failed(
    locked: tuple[Path, int, dict[str, Any], str], capsys: pytest.CaptureFixture[str]
) -> None:
    out = locked[0]
    assert main(["ci", "lock", "--check", str(out), "--json"]) == 1
    captured = capsys.readouterr()
    states = {c["id"]: c for c in json.loads(captured.out)["cells"]}
    assert {i: s["state"] for i, s in states.items()} == {
        i: ("new" if i == BROKEN else "current") for i in IDS
    }
    assert f"its lock failed when {out} was written: " in states[BROKEN]["changes"][0]
    assert f"1 of 4 cells would change: {BROKEN} (new)" in captured.err


def test_every_cell_takes_the_extra_indexes_and_routes_and_records_them(
    make_index: Callable[..., FakeIndex],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    uv_cache: None,
) -> None:
    """`ci lock --index NAME=URL --route ...` gives each cell's lock the routing, as
    `envlock lock` takes it (a torch range's builds from PyTorch's own index), and
    cells.json records it (the URL without its password) so the fix line and
    `--check` lock the same way."""
    default = _tf_index(make_index())
    extra = make_index()
    routed = extra.add_dist("dep-a", "1.0", init="WHERE = 'extra'\n")  # not default's bytes
    host = extra.url.split("//", 1)[1]
    url = f"http://user:secret@{host}"
    out = tmp_path / "cells"
    argv = ["ci", "lock", SPEC, "--python", "3.11", "-o", str(out), "--index-url", default.url]
    code = main([*argv, "--index", f"extra={url}", "--route", "dep-a=extra", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert [c["id"] for c in report["cells"]] == [
        "tf2.14.1-py3.11-cuda11.8",
        "tf2.15.1-py3.11-cuda12.2",
    ]
    lk = read_lock(out / "tf2.14.1-py3.11-cuda11.8")
    (dep,) = [p for p in lk.packages if p.name == "dep-a"]
    # from the routed index: its file and its bytes
    assert [w.sha256 for w in dep.wheels] == [extra.wheels[routed].sha256]
    assert extra.wheels[routed].sha256 != default.wheels[routed].sha256
    assert lk.input.indexes == (("extra", f"http://{host}"),)
    assert lk.input.routes == (("dep-a", "extra"),)
    recorded = json.loads((out / "cells.json").read_text())["input"]
    assert recorded["indexes"] == [f"extra=http://{host}"]
    assert recorded["routes"] == ["dep-a=extra"]
    assert "secret" not in (out / "cells.json").read_text()
    # --check reads what each bundle and cells.json recorded: current, and the routing
    # is not given again
    assert main(["ci", "lock", "--check", str(out), "--index-url", default.url, "--json"]) == 0
    checked = json.loads(capsys.readouterr().out)
    assert checked["ok"] is True
    assert f"--index extra=http://{host} --route dep-a=extra -o {out} --force" in checked["fix"]
    code = main(["ci", "lock", "--check", str(out), "--route", "dep-a=extra"])
    assert code == 2
    assert "--route not used" in capsys.readouterr().err
