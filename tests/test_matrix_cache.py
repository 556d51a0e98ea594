"""The marshal cache of the validated matrices (envlock.matrix.cache)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envlock.matrix import Matrix, load
from envlock.matrix import cache as matrix_cache


def test_plain_form_round_trips_the_whole_matrix() -> None:
    matrix = load()
    plain = matrix_cache.to_plain(matrix)
    again = matrix_cache.from_plain(plain)
    assert isinstance(again, Matrix)
    assert again == matrix and again is not matrix
    assert again.tensorflow.releases[0].version == matrix.tensorflow.releases[0].version


def test_plain_form_refuses_what_it_cannot_restore() -> None:
    with pytest.raises(TypeError, match="cannot cache a set"):
        matrix_cache.to_plain(({"12.2"},))


def test_a_changed_matrix_file_misses_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stamp holds the files' bytes: one changed byte is a miss."""
    folder = tmp_path / "matrices"
    folder.mkdir()
    real = matrix_cache.matrix_folder()
    assert real is not None
    for name in matrix_cache.MATRIX_FILES:
        (folder / name).write_bytes((Path(real) / name).read_bytes())
    monkeypatch.setattr(matrix_cache, "matrix_folder", lambda: str(folder))
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[int] = []

    def counting_load() -> Matrix:
        calls.append(1)
        return load()

    monkeypatch.setattr(matrix_cache, "load", counting_load)
    first = matrix_cache.load_matrix()
    second = matrix_cache.load_matrix()
    assert len(calls) == 1  # parsed once, then read from the cache
    assert second == first and second is not first
    gpus = folder / "gpus.toml"
    gpus.write_bytes(gpus.read_bytes() + b"\n")  # same data, other bytes
    matrix_cache.load_matrix()
    assert len(calls) == 2
    assert len(list((tmp_path / "cache").glob("matrix-*.marshal"))) == 1  # rewritten in place
