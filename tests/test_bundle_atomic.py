"""All-or-nothing bundles (envlock.bundle.manifest): a failing or killed write,
concurrent writers, -o refusals, files envlock did not write, and atomic_write
onto links and streams.

The bundles are the TF 2.14 and 2.15 golden locks of tests/golden/render, written
by the real ``envlock lock`` command with the resolver call replaced by the
golden lock (no uv, no index); the kill and concurrency loops of
bench/kill_loop.py run here in short versions against the local index.
"""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import envlock.bundle.folder as folder_module
from envlock import fsutil
from envlock.bundle import guard
from envlock.bundle.guard import LOCKFILE
from envlock.bundle.manifest import (
    JOURNAL,
    MANIFEST,
    bundle_problems,
    leftovers,
    read_manifest,
    recover_bundle,
)
from envlock.cli import main
from envlock.errors import EnvironmentFailure
from envlock.lock import read_lock
from envlock.model import Lock

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden" / "render"


class Died(BaseException):
    """What a kill -9 looks like from inside: nothing after it runs, no handler."""


@pytest.fixture()
def golden_lock(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """``choose("2.14")``: the next `envlock lock` gets the TF 2.14 golden lock."""
    chosen: dict[str, Lock] = {}

    def fake_lock(*args: Any, **kwargs: Any) -> Lock:
        return chosen["lock"]

    def choose(version: str) -> None:
        chosen["lock"] = read_lock(GOLDEN / f"tf{version}-system")

    monkeypatch.setattr(folder_module, "lock", fake_lock)
    choose("2.15")
    return choose


def lock_cli(version: str, out: Path, *extra: str) -> int:
    return main(["lock", f"tensorflow=={version}", "-o", str(out), *extra])


def versions(bundle: Path) -> tuple[str, str]:
    """The TF version the lock says and the one expect.json says."""
    lock_version = read_lock(bundle).resolution.version
    expect = json.loads((bundle / "expect.json").read_text(encoding="utf-8"))
    return lock_version, expect["version"]


def snapshot(bundle: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(bundle.iterdir()) if p.is_file()}


@pytest.fixture()
def bundle_214(
    tmp_path: Path, golden_lock: Callable[[str], None], capsys: pytest.CaptureFixture[str]
) -> Path:
    out = tmp_path / "env"
    golden_lock("2.14")
    assert lock_cli("2.14", out) == 0
    capsys.readouterr()
    golden_lock("2.15")
    assert versions(out) == ("2.14.1", "2.14.1")
    assert bundle_problems(out) == []
    return out


# ------------------------------------------------------------------ a failing write


def failing_on_call(monkeypatch: pytest.MonkeyPatch, name: str, n: int, error: BaseException):
    """Make ``os.<name>`` raise ``error`` on its n-th call (once)."""
    real = getattr(os, name)
    calls = {"n": 0}

    def flaky(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == n:
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, flaky)
    return calls


def test_a_write_that_fails_half_way_leaves_the_old_bundle_whole(
    bundle_214: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(bundle_214)
    failing_on_call(monkeypatch, "replace", 3, OSError(5, "Input/output error"))
    assert lock_cli("2.15", bundle_214) == 3
    err = capsys.readouterr().err
    assert "cannot write to" in err and "the bundle there is as it was" in err
    assert "Traceback" not in err
    monkeypatch.undo()
    # not "the lock says 2.15, expect.json 2.14": the whole old bundle, nothing left over
    assert versions(bundle_214) == ("2.14.1", "2.14.1")
    assert snapshot(bundle_214) == before
    assert bundle_problems(bundle_214) == [] and leftovers(bundle_214) == []


def test_a_write_that_fails_before_the_switch_leaves_no_temp_files(
    bundle_214: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(bundle_214)
    failing_on_call(monkeypatch, "fsync", 4, OSError(28, "No space left on device"))
    assert lock_cli("2.15", bundle_214) == 3
    assert "No space left on device" in capsys.readouterr().err
    assert snapshot(bundle_214) == before
    assert leftovers(bundle_214) == []


# ------------------------------------------------------------------ killed at every step


def switch_steps(bundle: Path, golden_lock: Callable[[str], None]) -> int:
    """How many os.replace/os.unlink calls a 2.14 -> 2.15 lock makes (measured on a copy)."""
    counted = {"n": 0}
    real_replace, real_unlink = os.replace, os.unlink

    def count(real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counted["n"] += 1
            return real(*args, **kwargs)

        return wrapper

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "replace", count(real_replace))
        mp.setattr(os, "unlink", count(real_unlink))
        golden_lock("2.15")
        assert lock_cli("2.15", bundle) == 0
    return counted["n"]


def test_a_lock_killed_at_any_rename_or_unlink_is_made_whole_by_the_next_command(
    tmp_path: Path, golden_lock: Callable[[str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    """Die (as kill -9 would: no handler runs) at each rename or unlink of a
    2.14 -> 2.15 lock; `envlock render` afterwards finds the bundle all 2.14 or
    all 2.15, whole by its manifest, with no temp file."""
    probe = tmp_path / "probe"
    golden_lock("2.14")
    assert lock_cli("2.14", probe) == 0
    steps = switch_steps(probe, golden_lock)
    assert steps >= 12  # journal, the changed files, manifest, journal removed, backups
    seen = set()
    for step in range(1, steps + 1):
        bundle = tmp_path / f"env{step}"
        golden_lock("2.14")
        assert lock_cli("2.14", bundle) == 0
        old = read_manifest(bundle)
        golden_lock("2.15")
        calls = {"n": 0}
        with pytest.MonkeyPatch.context() as mp:
            for name in ("replace", "unlink"):
                mp.setattr(os, name, _dying(getattr(os, name), step, calls))
            with pytest.raises(Died):
                lock_cli("2.15", bundle)
        journal, temps = (bundle / JOURNAL).exists(), bool(leftovers(bundle))
        seen.add("journal" if journal else "temps" if temps else "clean")
        capsys.readouterr()
        assert main(["render", str(bundle)]) == 0  # the next command
        assert bundle_problems(bundle) == [], step
        now = read_manifest(bundle)
        if now == old:
            assert versions(bundle) == ("2.14.1", "2.14.1")
        else:
            assert versions(bundle) == ("2.15.1", "2.15.1"), step
    assert {"journal", "temps"} <= seen


def _dying(real: Callable[..., Any], step: int, calls: dict[str, int]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == step:
            raise Died
        return real(*args, **kwargs)

    return wrapper


def test_lock_check_build_and_verify_finish_an_interrupted_write_first(
    bundle_214: Path,
    golden_lock: Callable[[str], None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import envlock.image.build

    for command in ("check", "build", "verify"):
        # killed after the journal and the first two renames
        real = os.replace
        monkeypatch.setattr(os, "replace", _only(real, 3))
        target = "2.15" if read_lock(bundle_214).resolution.version == "2.14.1" else "2.14"
        golden_lock(target)
        with pytest.raises(Died):
            lock_cli(target, bundle_214)
        monkeypatch.setattr(os, "replace", real)
        assert (bundle_214 / JOURNAL).exists()
        assert bundle_problems(bundle_214) != []
        capsys.readouterr()
        if command == "check":
            seen: list[Path] = []

            def fake_check_lock(*args: Any, seen: list[Path] = seen, **kwargs: Any) -> Lock:
                seen.append(bundle_214)
                assert bundle_problems(bundle_214) == []  # already whole when it starts
                return read_lock(bundle_214)

            monkeypatch.setattr("envlock.bundle.check.lock", fake_check_lock)
            monkeypatch.setattr(
                "envlock.bundle.check.resolve",
                lambda _constraints: read_lock(bundle_214).resolution,
            )
            code = main(["lock", "--check", str(bundle_214)])
            assert seen and code in (0, 1)
        elif command == "build":

            def fake_build(directory: Path, **kwargs: Any) -> Any:
                assert bundle_problems(directory) == []
                raise EnvironmentFailure("no Docker here")

            monkeypatch.setattr(envlock.image.build, "build_image", fake_build)
            assert main(["build", str(bundle_214)]) == 3
        else:
            # the bundle is made whole before the key and the report are read
            missing = bundle_214.parent / "missing"
            args = ["verify", str(missing / "r.json"), "--key", str(missing / "k.pub.pem")]
            assert main([*args, "--lock", str(bundle_214)]) == 2
        err = capsys.readouterr().err
        assert "finished a write that was interrupted" in err
        assert bundle_problems(bundle_214) == []
        assert versions(bundle_214) == (target + ".1", target + ".1")


def _only(real: Callable[..., Any], step: int) -> Callable[..., Any]:
    calls = {"n": 0}

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == step:
            raise Died
        return real(*args, **kwargs)

    return wrapper


def test_recovery_touches_nothing_when_there_is_nothing_to_do(bundle_214: Path) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in bundle_214.iterdir()}
    assert recover_bundle(bundle_214) is None
    assert {p.name: p.stat().st_mtime_ns for p in bundle_214.iterdir()} == before
    assert recover_bundle(bundle_214 / "missing") is None


def test_leftover_temp_files_are_removed_by_the_next_run(
    bundle_214: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stray = bundle_214 / ".Dockerfile.abc123.envlock-tmp"
    stray.write_text("half a Dockerfile")
    mine = bundle_214 / ".my-notes.tmp"
    mine.write_text("not envlock's")
    assert main(["render", str(bundle_214)]) == 0
    assert "removed 1 temp file(s) left by an interrupted write" in capsys.readouterr().err
    assert not stray.exists() and mine.exists()


# ------------------------------------------------------------------ concurrent writers


def test_two_writers_in_one_process_serialise(
    bundle_214: Path, golden_lock: Callable[[str], None]
) -> None:
    """The lock is a flock on DIR/.envlock-lock: threads with their own open wait too."""
    order: list[str] = []
    with guard.BundleLock(bundle_214):
        order.append("first holds")

        def second() -> None:
            with guard.BundleLock(bundle_214):
                order.append("second holds")

        t = threading.Thread(target=second)
        t.start()
        t.join(0.3)
        assert t.is_alive()  # waiting
        order.append("first releases")
    t.join(5)
    assert order == ["first holds", "first releases", "second holds"]


def test_a_writer_that_waits_too_long_exits_3_naming_the_holder(bundle_214: Path) -> None:
    second = guard.BundleLock(bundle_214, timeout=0.1)
    with guard.BundleLock(bundle_214), pytest.raises(EnvironmentFailure) as info:
        second.__enter__()
    assert f"(pid {os.getpid()})" in info.value.message
    assert "is being written by another envlock" in info.value.message


# ------------------------------------------------------------------ where a bundle may go


def test_dash_o_root_home_and_a_file_are_refused_before_anything_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    dead_index = ["--index-url", "http://127.0.0.1:9/simple"]  # never reached
    for out, message in [
        ("/", "is the root of the file system"),
        (str(home), "is your home folder"),
        (str(home) + "/.", "is your home folder"),
        (str(a_file), "is a file, not a folder"),
    ]:
        assert lock_cli("2.15", Path(out), *dead_index) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"envlock: error: -o {Path(out)} ") and message in err, err
        assert "hint:" in err and "Traceback" not in err
    assert sorted(p.name for p in home.iterdir()) == []
    assert a_file.read_text() == "mine"
    assert main(["render", "/"]) == 2
    assert "is the root of the file system" in capsys.readouterr().err


def test_a_projects_own_dockerfile_is_not_overwritten_without_force(
    tmp_path: Path, golden_lock: Callable[[str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "Dockerfile").write_text("FROM python:3.11\n# the project's own\n")
    (project / "train.py").write_text("print('hi')\n")
    before = snapshot(project)
    assert lock_cli("2.15", project) == 2
    err = capsys.readouterr().err
    assert f"{project / 'Dockerfile'}: not written by envlock" in err
    assert "--force" in err and "Traceback" not in err
    assert snapshot(project) == before  # nothing written, no manifest
    assert not (project / MANIFEST).exists()

    assert lock_cli("2.15", project, "--force") == 0
    capsys.readouterr()
    assert (project / "Dockerfile").read_text().startswith("# Generated by envlock")
    assert (project / "train.py").read_text() == "print('hi')\n"  # left alone
    assert "train.py" not in (read_manifest(project) or {})
    # from now on the Dockerfile is envlock's: no --force needed
    golden_lock("2.14")
    assert lock_cli("2.14", project) == 0
    assert versions(project) == ("2.14.1", "2.14.1")


def test_files_the_bundle_no_longer_has_are_removed_unless_edited(
    tmp_path: Path, golden_lock: Callable[[str], None], capsys: pytest.CaptureFixture[str]
) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    out = tmp_path / "env"
    assert lock_cli("2.15", out, "--ca-cert", str(ca)) == 0
    assert "envlock-ca.pem" in (read_manifest(out) or {})
    (out / "render.json").unlink()  # forget the option: the next render drops the CA
    capsys.readouterr()
    assert main(["render", str(out), "--force"]) == 0
    assert not (out / "envlock-ca.pem").exists()
    assert bundle_problems(out) == []
    # a CA file written again (with --ca-cert) is envlock's own, not "foreign"
    assert main(["render", str(out), "--ca-cert", str(ca)]) == 0
    assert (out / "envlock-ca.pem").exists()


def test_the_manifest_lists_every_file_with_its_sha256(bundle_214: Path) -> None:
    doc = json.loads((bundle_214 / MANIFEST).read_text())
    assert doc["schema"] == "envlock.manifest/v1"
    listed = set(doc["files"])
    on_disk = {p.name for p in bundle_214.iterdir()} - {MANIFEST, LOCKFILE}
    assert listed == on_disk
    for name, entry in doc["files"].items():
        assert entry["sha256"] == fsutil.sha256_file(bundle_214 / name)
    assert stat.S_IMODE((bundle_214 / "bootstrap.sh").stat().st_mode) == 0o755
    assert not (bundle_214 / JOURNAL).exists()


# ------------------------------------------------------------------ atomic_write targets


def test_atomic_write_keeps_a_link_and_writes_through_it(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    fsutil.atomic_write(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_atomic_write_into_a_stream_is_not_replaced_by_a_file(tmp_path: Path) -> None:
    """`-o /dev/stdout`: a link to a pipe; today's writer replaced the link with a file."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "stdout"
    link.symlink_to(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    fsutil.atomic_write(link, '{"ok": true}\n')
    reader.join(5)
    assert got == [b'{"ok": true}\n']
    assert link.is_symlink() and stat.S_ISFIFO(fifo.stat().st_mode)
    null = tmp_path / "null"
    null.symlink_to("/dev/null")
    fsutil.atomic_write(null, "x")
    assert null.is_symlink() and os.readlink(null) == "/dev/null"


def test_atomic_write_onto_a_folder_is_exit_2(tmp_path: Path) -> None:
    from envlock.errors import UsageError

    with pytest.raises(UsageError, match="is a folder, not a file"):
        fsutil.atomic_write(tmp_path, "x")


# ------------------------------------------------------------------ the loops, short


@pytest.fixture(scope="module")
def kill_loop() -> Iterator[Any]:
    spec = importlib.util.spec_from_file_location("kill_loop", REPO / "bench" / "kill_loop.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["kill_loop"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("kill_loop", None)


@pytest.mark.main_python
@pytest.mark.slow  # 20 real locks and renders, ten of them killed: 33 s in a loaded run
def test_kill_and_concurrency_loops_short(
    kill_loop: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    report = kill_loop.main(
        ["--kills", "5", "--write-kills", "5", "--pairs", "2", "--render-pairs", "3"]
    )
    assert report["ok"], json.dumps(report, indent=2)
    assert report["lock_kills"]["ok"] == 5 and report["write_kills"]["ok"] == 5
    assert report["lock_pairs"]["ok"] == 2 and report["render_pairs"]["ok"] == 3
