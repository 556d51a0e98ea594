"""Fuzzing the callers of the bounded readers with hostile files (issue #38).

Each example puts one hostile thing where a command reads a file the user
names: random bytes, an empty file, a FIFO nobody writes to, a link to
/dev/zero, a folder, a dangling link, a sparse file past every bound. Then
the command runs in this process. It must end in exit 0-3 with no traceback,
never hang (the FIFO is never opened for a blocking read), and never hold more
than a few MiB at once (tracemalloc's peak, over the whole example). What each
command reads: a report (`report page`, `verify`), a smoke result (`report
sign`), a TOML table (`ci init --actions-from`), a matrix file (`matrix check
--matrix`), a summary (`report page --summary`).
"""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest
from fuzz_support import scaled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from report_support import make_keys

from envlock.cli import main

KINDS = ("bytes", "empty", "fifo", "zero-link", "folder", "dangling", "sparse")
PEAK = 16 * 1024 * 1024  # far below any bound a reader lets through (64 MiB)


def plant(path: Path, kind: str, data: bytes) -> None:
    if kind == "bytes":
        path.write_bytes(data)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero-link":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    elif kind == "dangling":
        path.symlink_to(path.parent / "nowhere")
    else:
        with path.open("wb") as f:
            f.truncate(512 * 1024 * 1024)  # sparse: no disk used


def commands(path: Path, keys: tuple[Path, Path], out: Path) -> dict[str, list[str]]:
    key, pub = keys
    return {
        "report page": ["report", "page", "--key", str(pub), "-o", str(out), str(path)],
        "page --summary": [
            "report",
            "page",
            "--key",
            str(pub),
            "-o",
            str(out),
            "--summary",
            str(path),
        ],
        "verify": ["verify", str(path), "--key", str(pub)],
        "report sign": ["report", "sign", str(path), "--key", str(key), "-o", str(out / "r.json")],
        "matrix check": ["matrix", "check", "--matrix", str(path)],
    }


@pytest.mark.parametrize(
    "command", ["report page", "page --summary", "verify", "report sign", "matrix check"]
)
def test_hostile_files_never_give_a_traceback_a_hang_or_a_big_peak(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = make_keys(tmp_path, "team")
    counter = iter(range(10**6))
    seen: dict[int, int] = {}

    @settings(
        max_examples=scaled(40),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(kind=st.sampled_from(KINDS), data=st.binary(max_size=4096))
    def run(kind: str, data: bytes) -> None:
        case = tmp_path / f"case{next(counter)}"
        case.mkdir()
        path = case / "input"
        plant(path, kind, data)
        argv = commands(path, keys, case / "out")[command]
        tracemalloc.start()
        try:
            code = main(argv)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        out, err = capsys.readouterr()
        assert code in (0, 1, 2, 3), (kind, code, err)
        assert "Traceback" not in err and "Traceback" not in out, err
        if code == 2:
            assert err.startswith("envlock: error: "), err
        assert peak < PEAK, (kind, peak)
        seen[code] = seen.get(code, 0) + 1

    # once first, untraced: the imports and caches of a first run are not a read's
    warm = tmp_path / "warm"
    warm.mkdir()
    (warm / "input").write_bytes(b"{}")
    main(commands(warm / "input", keys, warm / "out")[command])
    capsys.readouterr()
    run()
    assert sum(seen.values()) >= 25, seen  # the examples ran (scaled() draws at least 25)
