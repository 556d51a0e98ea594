"""A full disk: ``envlock lock``, ``render`` and ``matrix refresh -o`` into a small tmpfs.

Each command first writes its outputs there while there is room; then the
disk is filled to the last byte and the command runs again with other input,
so it must write new bytes: exit 3 naming the folder and "No space left on
device", the earlier outputs intact byte for byte, and no temp file left.
Mounting needs root: elsewhere the tests skip, saying so.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fixtures.index.fakeindex import FakeIndex
from test_faults import snapshot
from test_matrix_refresh import build_index

from envlock.cli import main

SIZE = "256k"
pytestmark = pytest.mark.root  # mount


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True, check=False)


def fill(disk: Path) -> Path:
    """Fill ``disk`` to the last byte; the filler file."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:  # unbuffered: nothing left to flush
        for size in (1 << 16, 4096, 512, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError as e:
                assert e.errno == errno.ENOSPC
    return filler


def _no_room(err: str, folder: Path) -> None:
    assert f"envlock: error: cannot write to {folder}: No space left on device\n" in err, err
    assert "hint: check that the folder is writable and the disk is not full" in err
    assert "Traceback" not in err


@pytest.fixture
def lock_index(make_index: Callable[..., FakeIndex]) -> FakeIndex:
    idx = make_index()
    idx.add_dist(
        "tensorflow", "2.15.1", tag="py3-none-manylinux_2_17_x86_64", requires=("dep-a>=1,<2",)
    )
    for v in ("1.0", "1.5"):
        idx.add_dist("dep-a", v)
    return idx


def test_lock_and_render_on_a_full_disk_exit_3_and_leave_the_bundle(
    small_disk: Path,
    lock_index: FakeIndex,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))  # off the small disk
    bundle = small_disk / "env"
    lock = ["lock", "tensorflow==2.15", "--index-url", lock_index.url, "-o", str(bundle)]
    assert main(lock) == 0
    capsys.readouterr()
    fill(small_disk)
    before = snapshot(small_disk)

    assert main([*lock, "--with", "dep-a==1.0"]) == 3
    _no_room(capsys.readouterr().err, bundle)
    assert snapshot(small_disk) == before

    assert main(["render", str(bundle), "--base-image", "envlock-test/other:1"]) == 3
    _no_room(capsys.readouterr().err, bundle)
    assert snapshot(small_disk) == before


def test_matrix_refresh_on_a_full_disk_exits_3_and_leaves_the_matrix(
    small_disk: Path,
    make_index: Callable[..., FakeIndex],
    capsys: pytest.CaptureFixture[str],
) -> None:
    idx = build_index(make_index())
    out = small_disk / "tensorflow.toml"
    out.write_text("earlier matrix\n", encoding="utf-8")
    fill(small_disk)
    before = snapshot(small_disk)
    assert main(["matrix", "refresh", "--index-url", idx.url, "-o", str(out)]) == 3
    _no_room(capsys.readouterr().err, small_disk)
    assert snapshot(small_disk) == before
