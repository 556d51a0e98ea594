"""envlock wheelhouse and envlock restore against a local index on 127.0.0.1.

The bundle is a real `envlock lock` of a tiny 'tensorflow' 2.15.1 (a fake wheel
with one module) from the local index. The smoke harness cannot test a fake
framework, so these tests put a small stand-in envlock_smoke.py in the bundle
(restore runs whatever harness the bundle holds): it imports the locked
modules and answers PASSED, or FAILED, or waits, as the test asks. The real
harness runs in test_restore_tf.py, with real TensorFlow.

This machine (and CI) has no NVIDIA GPU: restore checks for one before it
builds anything, so every restore here that is meant to build passes
--allow-cpu, and one test checks the refusal without it.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fixtures.index.fakeindex import FakeIndex, FakeWheel, closed_port
from test_bootstrap_drift import installed

from envlock.cli import main
from envlock.venv.restore import find_python

LOCAL_BASE = "envlock-test/bookworm-python:1"
ENVLOCK = Path(sys.executable).parent / "envlock"
STUB = """\
import json, os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
mode = open(os.path.join(here, "stub-mode")).read().strip() if os.path.exists(
    os.path.join(here, "stub-mode")) else "pass"
if mode == "wait":
    open(os.path.join(here, "stub-started"), "w").close()
    time.sleep(60)
import dep_a, tensorflow
status = "FAILED" if mode == "fail" else "PASSED"
checks = [{"name": "import", "status": "FAIL" if mode == "fail" else "PASS",
           "reason": "stand-in harness, dep_a " + dep_a.VERSION, "argv": sys.argv[1:]}]
print(json.dumps({"schema": "envlock.smoke/v1", "status": status, "checks": checks}))
sys.exit(1 if mode == "fail" else 0)
"""


@pytest.fixture()
def bundle(
    make_index: Callable[..., FakeIndex],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[Path, FakeIndex]:
    idx = make_index()
    idx.add_dist(
        "tensorflow", "2.15.1", tag="py3-none-manylinux_2_17_x86_64", requires=("dep-a>=1,<2",)
    )
    for v in ("1.0", "1.5"):
        idx.add_dist("dep-a", v)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    out = tmp_path / "env"
    code = main(
        ["lock", "tensorflow==2.15", "--index-url", idx.url, "-o", str(out)]
        + ["--base-image", LOCAL_BASE, "--python-from", "image"]
    )
    capsys.readouterr()
    assert code == 0
    (out / "envlock_smoke.py").write_text(STUB, encoding="utf-8")
    return out, idx


def wheelhouse(bundle: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    wh = bundle.parent / "wh"
    assert main(["wheelhouse", str(bundle), "-o", str(wh), "--json"]) == 0
    capsys.readouterr()
    return wh


def offline_args(bundle: Path, wh: Path, venv: Path) -> list[str]:
    dead = f"http://127.0.0.1:{closed_port()}/simple"
    return ["restore", str(bundle), "--venv", str(venv), "--wheelhouse", str(wh)] + [
        "--index-url",
        dead,
        "--allow-cpu",  # no GPU here: see the module's docstring
    ]


def pasted(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` run as a user pastes it: bash, envlock on PATH."""
    env = {**os.environ, "PATH": f"{ENVLOCK.parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-c", command], env=env, cwd=cwd, capture_output=True, text=True, timeout=300
    )


def hint_command(err: str, after: str) -> str:
    """The command in the hint line of ``err``, the text after ``after``."""
    hint = next(line for line in err.splitlines() if line.startswith("  hint: "))
    assert after in hint, hint
    return hint.split(after, 1)[1]


# ------------------------------------------------------------------ wheelhouse


def test_wheelhouse_downloads_every_locked_wheel_and_keeps_good_ones(
    bundle: tuple[Path, FakeIndex], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, idx = bundle
    wh = folder.parent / "wh"
    assert main(["wheelhouse", str(folder), "-o", str(wh), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    names = sorted(p.name for p in wh.iterdir())
    assert names == [
        "dep_a-1.5-py3-none-any.whl",
        "tensorflow-2.15.1-py3-none-manylinux_2_17_x86_64.whl",
    ]
    assert sorted(doc["downloaded"]) == names and doc["present"] == []
    for n in names:
        assert (wh / n).read_bytes() == idx.wheels[n].data
    # a second run downloads nothing; a damaged file and a killed run's temp file are redone
    (wh / names[0]).write_bytes(b"damaged")
    (wh / ".envlock-part-999-x.whl").write_bytes(b"half")
    assert main(["wheelhouse", str(folder), "-o", str(wh), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["downloaded"] == [names[0]] and doc["present"] == [names[1]]
    assert sorted(p.name for p in wh.iterdir()) == names
    assert (wh / names[0]).read_bytes() == idx.wheels[names[0]].data


def test_wheelhouse_refuses_a_download_whose_hash_is_not_the_locks(
    bundle: tuple[Path, FakeIndex], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, idx = bundle
    name = "dep_a-1.5-py3-none-any.whl"
    listed = idx.wheels[name].sha256
    idx.wheels[name] = FakeWheel(name, b"another file under the same name")
    wh = folder.parent / "wh"
    assert main(["wheelhouse", str(folder), "-o", str(wh)]) == 3
    err = capsys.readouterr().err
    assert f"envlock: error: {name}: the sha256 of the download is not the lock's" in err
    assert f"listed {listed}, received {idx.wheels[name].sha256}" in err
    assert not (wh / name).exists()
    assert [p.name for p in wh.iterdir() if p.name.startswith(".")] == []


def test_wheelhouse_never_writes_through_a_link_planted_at_a_temp_name(
    bundle: tuple[Path, FakeIndex], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Before: the temp name was .envlock-part-PID-NAME, opened without O_EXCL,
    and a dangling link there made the download land outside the wheelhouse."""
    folder, idx = bundle
    wh = folder.parent / "wh"
    wh.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in idx.wheels:
        (wh / f".envlock-part-{os.getpid()}-{name}").symlink_to(outside / name)
    assert main(["wheelhouse", str(folder), "-o", str(wh), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(outside.iterdir()) == []
    names = sorted(p.name for p in wh.iterdir())
    assert sorted(doc["downloaded"]) == names  # the planted links removed, nothing else left
    for n in names:
        assert not (wh / n).is_symlink() and (wh / n).read_bytes() == idx.wheels[n].data


def test_wheelhouse_stops_a_body_larger_than_the_locked_size(
    bundle: tuple[Path, FakeIndex], capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: all 64 MiB were downloaded to disk, then the hash refused them."""
    folder, idx = bundle
    name = "dep_a-1.5-py3-none-any.whl"
    size = len(idx.wheels[name].data)
    idx.wheels[name] = FakeWheel(name, idx.wheels[name].data + bytes(64 << 20))
    wh = folder.parent / "wh"
    assert main(["wheelhouse", str(folder), "-o", str(wh)]) == 3
    err = capsys.readouterr().err
    assert f"envlock: error: {name}: the download is larger than the lock's {size} bytes" in err
    assert "Traceback" not in err
    assert not (wh / name).exists()
    assert [p.name for p in wh.iterdir() if p.name.startswith(".")] == []
    assert idx.sent[f"/files/{name}"] < 16 << 20  # the client hung up near the limit


# ------------------------------------------------------------------ restore


@pytest.mark.venv
@pytest.mark.other_python
def test_offline_restore_from_a_wheelhouse_with_the_index_unreachable(
    bundle: tuple[Path, FakeIndex],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    folder, idx = bundle
    wh = wheelhouse(folder, capsys)
    idx.stop()
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "fresh-cache"))
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{closed_port()}/simple")
    venv = tmp_path / "venv"
    assert main(offline_args(folder, wh, venv)) == 0
    out = capsys.readouterr().out
    assert venv.is_symlink() and os.readlink(venv) == "venv.envlock-1"
    assert installed(venv) == {"tensorflow": "2.15.1", "dep-a": "1.5"}
    # Python 3.10: resolve's default for 2.15 is ubuntu22.04's own python3 (issue 14)
    assert out.startswith(f"{venv} -> venv.envlock-1: restored from {folder} (Python 3.10: ")
    assert "smoke PASSED" in out and "\nnew venv: " in out and " distributions\n" in out


@pytest.mark.main_python  # a restore (see tests/pythons.sh)
@pytest.mark.venv
@pytest.mark.other_python
def test_restore_repairs_drift_prints_it_and_cleans_the_previous_folder(
    bundle: tuple[Path, FakeIndex], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder, _ = bundle
    wh = wheelhouse(folder, capsys)
    venv = tmp_path / "venv"
    assert main(offline_args(folder, wh, venv)) == 0
    capsys.readouterr()
    py = str(venv / "bin" / "python")
    subprocess.run([py, "-m", "pip", "uninstall", "-y", "-q", "dep-a"], check=True)
    assert main([*offline_args(folder, wh, venv), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["added"] == [["dep-a", "1.5"]] and doc["removed"] == [] and doc["changed"] == []
    assert doc["previous"] == str(tmp_path / "venv.envlock-1")
    assert os.readlink(venv) == "venv.envlock-2"
    assert installed(venv) == {"tensorflow": "2.15.1", "dep-a": "1.5"}
    assert main(offline_args(folder, wh, venv)) == 0
    out = capsys.readouterr().out
    assert "removed venv.envlock-1" in out and "no distribution changed" in out
    assert sorted(p.name for p in tmp_path.glob("venv*")) == [
        "venv",
        "venv.envlock-2",
        "venv.envlock-3",
        "venv.envlock-lock",
    ]


@pytest.mark.main_python  # a restore (see tests/pythons.sh)
@pytest.mark.venv
@pytest.mark.other_python
def test_a_failing_smoke_test_switches_nothing(
    bundle: tuple[Path, FakeIndex], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder, _ = bundle
    wh = wheelhouse(folder, capsys)
    venv = tmp_path / "venv"
    assert main(offline_args(folder, wh, venv)) == 0
    capsys.readouterr()
    (folder / "stub-mode").write_text("fail", encoding="utf-8")
    assert main(offline_args(folder, wh, venv)) == 1
    err = capsys.readouterr().err
    assert (
        "envlock: error: the smoke test failed in the new venv, so it was not switched in "
        f"({venv} is unchanged): import: stand-in harness, dep_a 1.5" in err
    )
    assert "hint:" not in err  # --allow-cpu was given: no advice to add it
    assert os.readlink(venv) == "venv.envlock-1"
    assert not (tmp_path / "venv.envlock-2").exists()


def made(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.rglob("*") if "venv" in p.name)


@pytest.mark.main_python  # a restore (see tests/pythons.sh)
@pytest.mark.venv
@pytest.mark.other_python
def test_restore_without_a_gpu_stops_in_seconds_having_made_nothing(
    bundle: tuple[Path, FakeIndex], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Before: the venv was created and the whole lock installed, then the smoke
    test failed on 'no GPU visible' (minutes for a real TensorFlow)."""
    from envlock.driver import detect
    from envlock.errors import EnvlockError

    try:
        if detect().gpus:
            pytest.skip("this machine has an NVIDIA GPU")
    except EnvlockError:
        pass
    folder, _ = bundle
    wh = wheelhouse(folder, capsys)
    venv = tmp_path / "project" / "venv"
    argv = [str(ENVLOCK), "restore", str(folder), "--venv", str(venv), "--wheelhouse", str(wh)]
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    took = time.monotonic() - start
    assert proc.returncode == 1, proc.stderr
    assert took < 5, f"{took:.1f} s"
    err = proc.stderr
    assert err.startswith("envlock: error: no NVIDIA GPU on this machine (")
    assert "restore stopped before building anything (nothing was made)" in err
    assert "Traceback" not in err and proc.stdout == ""
    assert made(tmp_path) == [] and not (tmp_path / "project").exists()
    fix = hint_command(err, "if the CPU is meant: ")
    assert fix == shlex.join([*argv, "--allow-cpu"]).replace(str(ENVLOCK), "envlock", 1)
    done = pasted(fix, tmp_path)  # the fix as printed: the same bundle and venv
    assert done.returncode == 0, done.stderr
    assert os.readlink(venv) == "venv.envlock-1"
    assert installed(venv) == {"tensorflow": "2.15.1", "dep-a": "1.5"}


@pytest.mark.main_python  # a restore (see tests/pythons.sh)
@pytest.mark.venv
@pytest.mark.other_python
def test_a_wheelhouse_with_a_missing_and_a_truncated_wheel_names_both_before_building(
    bundle: tuple[Path, FakeIndex], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Before: the venv was built, then uv stopped at the first bad wheel with its
    own message ('Failed to extract archive ...'), one wheel at a time."""
    folder, idx = bundle
    wh = wheelhouse(folder, capsys)
    dep = "dep_a-1.5-py3-none-any.whl"
    tf = "tensorflow-2.15.1-py3-none-manylinux_2_17_x86_64.whl"
    (wh / dep).unlink()
    data = idx.wheels[tf].data
    (wh / tf).write_bytes(data[: len(data) // 2])
    venv = tmp_path / "venv"
    assert main(offline_args(folder, wh, venv)) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"envlock: error: --wheelhouse {wh} does not match the lock: 2 of 2 locked wheels "
        "missing or damaged; nothing was built (exit 2: "
    )
    assert f"\n  {dep}: missing\n" in err
    assert f"\n  {tf}: {len(data) // 2} bytes, the lock has {len(data)} (truncated" in err
    assert "Traceback" not in err and "extract" not in err and "Failed to" not in err
    assert made(tmp_path) == []
    fix = hint_command(err, "hash-checked): ")
    assert fix.startswith(f"envlock wheelhouse {folder} -o {wh} && envlock restore {folder} ")
    done = pasted(fix, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (wh / tf).read_bytes() == data and (wh / dep).read_bytes() == idx.wheels[dep].data
    assert installed(venv) == {"tensorflow": "2.15.1", "dep-a": "1.5"}


@pytest.mark.main_python  # a restore (see tests/pythons.sh)
@pytest.mark.venv
@pytest.mark.other_python
def test_offline_with_an_empty_cache_and_no_wheelhouse_says_what_to_run(
    bundle: tuple[Path, FakeIndex],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Before: uv's raw 'dep-a was not found in the cache ... the network was
    disabled', with a deprecation warning about UV_NATIVE_TLS on top."""
    folder, idx = bundle
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "empty-cache"))
    venv = tmp_path / "venv"
    argv = ["restore", str(folder), "--venv", str(venv), "--offline", "--allow-cpu"]
    assert main([*argv, "--index-url", idx.url]) == 2
    err = capsys.readouterr().err
    assert (
        "\nenvlock: error: --offline: uv's cache does not hold every locked wheel and no "
        f"--wheelhouse was given, so there is nothing to install from ({venv} is unchanged)"
    ) in err
    assert "not found in the cache" not in err and "deprecated" not in err.lower()
    assert made(tmp_path) == ["venv.envlock-lock"]  # the new folder removed
    wh = f"{folder}-wheelhouse"
    fix = hint_command(err, "restore from it offline: ")
    assert fix == (
        f"envlock wheelhouse {folder} -o {wh} && envlock restore {folder} --venv {venv} "
        f"--wheelhouse {wh} --offline --allow-cpu"
    )
    done = pasted(fix, tmp_path)
    assert done.returncode == 0, done.stderr
    assert installed(venv) == {"tensorflow": "2.15.1", "dep-a": "1.5"}


@pytest.mark.main_python  # a restore (see tests/pythons.sh)
@pytest.mark.venv
@pytest.mark.other_python
def test_an_install_failure_shows_no_deprecation_warning_of_uv(
    bundle: tuple[Path, FakeIndex],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Before: restore set UV_NATIVE_TLS=1 over uv_env's UV_SYSTEM_CERTS; a uv that
    sees only the old name puts 'The UV_NATIVE_TLS environment variable is
    deprecated' into the error (uv 0.13.9 keeps quiet when both are set, so the
    environment uv gets is checked too)."""
    import envlock.venv.restore as restore_mod

    seen: list[dict[str, str]] = []
    real_run = restore_mod.run_step

    def recording(argv: list[str], doing: str, timeout: float, env: Any = None) -> str:
        if env is not None:
            seen.append(dict(env))
        return real_run(argv, doing, timeout, env)

    monkeypatch.setattr(restore_mod, "run_step", recording)
    folder, idx = bundle
    name = "dep_a-1.5-py3-none-any.whl"
    idx.wheels[name] = FakeWheel(name, b"another file under the same name")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "fresh-cache"))
    venv = tmp_path / "venv"
    argv = ["restore", str(folder), "--venv", str(venv), "--index-url", idx.url, "--allow-cpu"]
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert "envlock: error: the hashed install failed (exit " in err
    assert "deprecated" not in err.lower() and "UV_NATIVE_TLS" not in err
    assert seen and all("UV_NATIVE_TLS" not in env for env in seen)
    assert all(env.get("UV_SYSTEM_CERTS") == "1" for env in seen)
    assert "Traceback" not in err
    assert not os.path.lexists(venv) and not (tmp_path / "venv.envlock-1").exists()


@pytest.mark.main_python  # a restore (see tests/pythons.sh)
@pytest.mark.venv
@pytest.mark.other_python
def test_the_wheelhouse_hint_names_the_venv_and_works_when_pasted(
    bundle: tuple[Path, FakeIndex], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Before: 'envlock restore DIR --wheelhouse WH', the venv left out."""
    folder, _ = bundle
    wh = tmp_path / "wh"
    assert main(["wheelhouse", str(folder), "-o", str(wh)]) == 0
    out = capsys.readouterr().out
    line = out.splitlines()[-1]
    venv = folder / ".venv"
    assert line == (
        f"  restore without an index (into {venv}, the venv bootstrap.sh makes; give --venv "
        "for another venv): "
        f"envlock restore {folder} --venv {venv} --wheelhouse {wh}"
    )
    fix = line.split("another venv): ", 1)[1] + " --allow-cpu"  # no GPU here
    done = pasted(fix, tmp_path)
    assert done.returncode == 0, done.stderr
    assert os.readlink(venv) == ".venv.envlock-1"
    assert installed(venv) == {"tensorflow": "2.15.1", "dep-a": "1.5"}


@pytest.mark.main_python  # a restore (see tests/pythons.sh)
@pytest.mark.venv
@pytest.mark.other_python
def test_a_plain_venv_folder_becomes_a_link_and_is_kept(
    bundle: tuple[Path, FakeIndex], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder, _ = bundle
    wh = wheelhouse(folder, capsys)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    assert main(offline_args(folder, wh, venv)) == 0
    out = capsys.readouterr().out
    assert f"{venv} was a plain folder; it is now a link, the old venv kept as " in out
    assert os.readlink(venv) == "venv.envlock-1"
    assert (tmp_path / "venv.envlock-0" / "pyvenv.cfg").is_file()
    assert "  + dep-a 1.5\n" in out and "  + tensorflow 2.15.1\n" in out


@pytest.mark.parametrize("planted", ["link-to-folder", "dangling-link", "file"])
@pytest.mark.other_python
def test_a_link_or_file_at_the_envlock_0_name_is_refused_before_anything_is_built(
    bundle: tuple[Path, FakeIndex], capsys: pytest.CaptureFixture[str], tmp_path: Path, planted: str
) -> None:
    """Before: the new venv was built, then os.rename(venv, venv.envlock-0) failed
    with a NotADirectoryError traceback (the link kept, the new folder left behind)."""
    folder, _ = bundle
    wh = wheelhouse(folder, capsys)
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    zero = tmp_path / "venv.envlock-0"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("mine")
    if planted == "link-to-folder":
        zero.symlink_to(outside)
    elif planted == "dangling-link":
        zero.symlink_to(tmp_path / "nowhere")
    else:
        zero.write_text("a file")
    assert main(offline_args(folder, wh, venv)) == 2
    err = capsys.readouterr().err
    assert f"envlock: error: --venv {venv}: venv.envlock-0 beside it is " in err
    assert "Traceback" not in err and "hint: move or remove" in err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("venv")) == [
        "venv",
        "venv.envlock-0",
        "venv.envlock-lock",
    ]  # nothing built, nothing moved
    assert zero.is_symlink() or zero.read_text() == "a file"
    assert sorted(os.listdir(outside)) == ["keep"] and (venv / "pyvenv.cfg").is_file()


def test_no_python_of_the_locked_minor_says_how_to_get_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from envlock.errors import UsageError

    with pytest.raises(UsageError) as info:
        find_python("3.99", None)
    assert "no Python 3.99 on this machine" in info.value.message
    assert info.value.hint is not None and "uv python install 3.99" in info.value.hint
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    other = "3.10" if running != "3.10" else "3.11"
    with pytest.raises(UsageError, match=f"is Python {running}; the lock is for Python {other}"):
        find_python(other, sys.executable)


def test_the_next_restore_finishes_a_switch_killed_between_its_renames(tmp_path: Path) -> None:
    from envlock.venv.restore import recover

    venv = tmp_path / "venv"
    (tmp_path / "venv.envlock-0").mkdir()
    (tmp_path / "venv.envlock-1").mkdir()
    (tmp_path / "venv.envlock-switch").write_text('{"to": "venv.envlock-1"}', encoding="utf-8")
    os.symlink("venv.envlock-1", tmp_path / "venv.envlock-link-4242")
    done = recover(venv)
    assert done == [
        f"finished an interrupted switch: {venv} -> venv.envlock-1",
        "removed venv.envlock-link-4242",
    ]
    assert os.readlink(venv) == "venv.envlock-1"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "venv",
        "venv.envlock-0",
        "venv.envlock-1",
    ]
    assert recover(venv) == []


@pytest.mark.main_python  # a restore (see tests/pythons.sh)
@pytest.mark.other_python
def test_a_restore_that_fails_its_wheelhouse_check_first_finishes_a_killed_switch(
    bundle: tuple[Path, FakeIndex], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 38, break 14 (a round-3 case that broke when the fail-fast checks came):
    a restore killed between its two renames leaves the venv path missing and a
    journal; the next restore, whose wheelhouse is not the lock's (exit 2), still
    finishes that switch first, so the venv path works again."""
    folder, _ = bundle
    wh = wheelhouse(folder, capsys)
    (wh / "dep_a-1.5-py3-none-any.whl").unlink()
    venv = tmp_path / "venv"
    (tmp_path / "venv.envlock-0").mkdir()
    new = tmp_path / "venv.envlock-1"
    (new / "bin").mkdir(parents=True)
    (new / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (tmp_path / "venv.envlock-switch").write_text('{"to": "venv.envlock-1"}', encoding="utf-8")
    assert not os.path.lexists(venv)
    assert main(offline_args(folder, wh, venv)) == 2
    err = capsys.readouterr().err
    assert f"--wheelhouse {wh} does not match the lock" in err and "Traceback" not in err
    assert os.readlink(venv) == "venv.envlock-1"
    assert not (tmp_path / "venv.envlock-switch").exists()


# ------------------------------------------------------------------ kill -9


@pytest.mark.main_python
# a real restore killed at each point, then the next one: 15-22 s alone, 25-36 s
# in a loaded suite run (slow: its module is scheduled among the first)
@pytest.mark.slow
@pytest.mark.parametrize("point", ["venv", "install", "smoke", "early"])
@pytest.mark.venv
@pytest.mark.other_python
def test_kill_9_during_restore_leaves_the_old_venv_working(
    bundle: tuple[Path, FakeIndex],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    point: str,
) -> None:
    folder, _ = bundle
    wh = wheelhouse(folder, capsys)
    venv = tmp_path / "venv"
    assert main(offline_args(folder, wh, venv)) == 0
    capsys.readouterr()
    if point == "smoke":
        (folder / "stub-mode").write_text("wait", encoding="utf-8")
    argv = [sys.executable, "-m", "envlock", *offline_args(folder, wh, venv)]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    new = tmp_path / "venv.envlock-2"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if point == "early" and (tmp_path / "venv.envlock-lock").exists():
            break
        if point == "venv" and new.exists():
            break
        if (
            point == "install"
            and (new / "bin" / "python").exists()
            and (new / "pyvenv.cfg").exists()
        ):
            break
        if point == "smoke" and (folder / "stub-started").exists():
            break
        time.sleep(0.005)
    assert proc.poll() is None, "restore ended before the kill"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert os.readlink(venv) == "venv.envlock-1"
    check = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import dep_a, tensorflow; print(dep_a.VERSION)"],
        capture_output=True,
        text=True,
    )
    assert check.stdout == "'1.5'\n" or check.stdout == "1.5\n"
    # the next restore cleans up and switches
    (folder / "stub-mode").unlink(missing_ok=True)
    assert main(offline_args(folder, wh, venv)) == 0
    assert os.readlink(venv) in ("venv.envlock-2", "venv.envlock-3")
    left = sorted(p.name for p in tmp_path.glob("venv.envlock-*") if p.is_dir())
    assert left == ["venv.envlock-1", os.readlink(venv)]


def _seeded(venv: Path) -> tuple[dict[str, str], list[str]]:
    """The distributions in a venv (pip's own view) and its bin/ folder."""
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    dists = {d["name"]: d["version"] for d in json.loads(out.stdout)}
    return dists, sorted(p.name for p in (venv / "bin").iterdir())


@pytest.mark.venv
def test_the_new_venv_is_seeded_as_python_m_venv_seeds_one(tmp_path: Path) -> None:
    """restore's venv: the same pip (and setuptools before 3.12) as `python -m venv`,
    from the interpreter's own ensurepip wheels, the same bin/ folder."""
    from envlock.venv.restore import create_venv

    plain = tmp_path / "plain"
    subprocess.run([sys.executable, "-m", "venv", str(plain)], check=True, timeout=600)
    create_venv(sys.executable, tmp_path / "fast")
    want = _seeded(plain)
    assert "pip" in want[0] and want[0].get("setuptools") == (
        None if sys.version_info >= (3, 12) else want[0]["setuptools"]
    )
    assert _seeded(tmp_path / "fast") == want
    # uv installed them (the fallback, ensurepip, would say pip)
    info = next((tmp_path / "fast").glob("lib/python3*/site-packages/pip-*.dist-info"))
    assert (info / "INSTALLER").read_text().strip() == "uv"
    # found by name as ensurepip's pip finds them, not a direct URL (capture would
    # leave a pip 'installed from a local file' out of its lock)
    assert not list((tmp_path / "fast").glob("lib/python3*/site-packages/*/direct_url.json"))


@pytest.mark.venv
def test_without_uv_the_new_venv_is_made_by_python_m_venv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import envlock.lock.uv as uv_mod
    from envlock.venv.restore import create_venv

    monkeypatch.setattr(uv_mod, "uv_bin", lambda: str(tmp_path / "no-uv"))
    create_venv(sys.executable, tmp_path / "venv")
    dists, _ = _seeded(tmp_path / "venv")
    assert "pip" in dists
    installer = next((tmp_path / "venv").glob("lib/python3*/site-packages/pip-*.dist-info"))
    assert (installer / "INSTALLER").read_text().strip() == "pip"  # ensurepip's install
