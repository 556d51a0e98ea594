"""The marshal cache of the validated matrices (envlock.matrix.cache)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import marshal
import os
import stat
from pathlib import Path

import pytest

from envlock import userstate
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


# --- forgery: the stamp is public, so only a MAC under the user's own key is believed ---


def public_cache(folder: Path) -> tuple[Path, bytes]:
    """Where the cache lies and the stamp it must carry, computed as anyone can:
    from the Python version, the paths and the bytes of public files."""
    import sys
    import zlib

    import envlock

    matrices = matrix_cache.matrix_folder()
    package = os.path.dirname(os.path.abspath(envlock.__file__))
    where = f"{sys.version}|{matrices}|{package}".encode()
    parts = [where]
    for base, names in (
        (matrices, matrix_cache.MATRIX_FILES),
        (os.path.join(package, "matrix"), matrix_cache.PARSER_FILES),
    ):
        for name in names:
            parts.append(Path(str(base), name).read_bytes())
    stamp = b"".join(b"%d:%s|" % (len(part), part) for part in parts)
    return folder / f"matrix-{zlib.crc32(where):08x}.marshal", stamp


def forged_matrix(kind: str) -> Matrix:
    matrix = load()
    releases = []
    for r in matrix.tensorflow.releases:
        if str(r.version) == "2.15.1":
            if kind == "other-cuda":  # valid values: a believable lie
                r = dataclasses.replace(r, cuda="11.2", cuda_full="11.2", cudnn="8.1")
            else:  # values of the wrong type: a traceback deep in resolve, before
                r = dataclasses.replace(r, cuda=None, python=7)  # type: ignore[arg-type]
        releases.append(r)
    tf = dataclasses.replace(matrix.tensorflow, releases=tuple(releases))
    return dataclasses.replace(matrix, tensorflow=tf)


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(folder))
    return folder


@pytest.mark.parametrize("kind", ["other-cuda", "wrong-types"])
@pytest.mark.parametrize("mac", ["none", "zeros", "another-key"])
def test_a_well_formed_forgery_with_the_public_stamp_is_refused_and_rebuilt(
    cache: Path, kind: str, mac: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the forgery was believed (resolve said CUDA 11.2 for 2.15, or a
    TypeError traceback); now it is refused, parsed again and rewritten."""
    from envlock.cli import main

    cache.mkdir(mode=0o700)
    path, stamp = public_cache(cache)
    body = marshal.dumps((stamp, matrix_cache.to_plain(forged_matrix(kind))))
    if mac == "zeros":
        body = bytes(32) + body
    elif mac == "another-key":
        body = hashlib.blake2b(body, key=os.urandom(32), digest_size=32).digest() + body
    path.write_bytes(body)
    assert main(["resolve", "tensorflow==2.15", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["version"], doc["cuda"], doc["cudnn"]) == ("2.15.1", "12.2", "8.9")
    assert path.read_bytes() != body  # rewritten, under the user's key
    assert matrix_cache.load_matrix() == load()


def test_the_key_is_a_private_file_made_once_and_the_cache_is_signed_with_it(cache: Path) -> None:
    first = matrix_cache.load_matrix()
    key = cache / matrix_cache.KEY_NAME
    st = key.lstat()
    secret = key.read_bytes()
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert len(key.read_bytes()) == userstate.KEY_BYTES
    (path,) = cache.glob("matrix-*.marshal")
    data = path.read_bytes()
    assert data[:32] == matrix_cache._mac(key.read_bytes(), data[32:])
    assert matrix_cache.load_matrix() == first
    assert key.read_bytes() == secret and key.lstat().st_ino == st.st_ino  # kept


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []

    def counting_load() -> Matrix:
        calls.append(1)
        return load()

    monkeypatch.setattr(matrix_cache, "load", counting_load)
    return calls


@pytest.mark.parametrize("problem", ["readable-by-others", "a-link", "a-folder"])
def test_a_key_that_is_not_the_users_private_file_is_never_trusted(
    cache: Path, monkeypatch: pytest.MonkeyPatch, problem: str, tmp_path: Path
) -> None:
    """Whoever planted or could read the key could sign a forgery: no cache then."""
    cache.mkdir(mode=0o700)
    key = cache / matrix_cache.KEY_NAME
    secret = b"k" * 32
    if problem == "readable-by-others":
        key.write_bytes(secret)
        key.chmod(0o644)
    elif problem == "a-link":
        (tmp_path / "planted").write_bytes(secret)
        (tmp_path / "planted").chmod(0o600)
        key.symlink_to(tmp_path / "planted")
    else:
        key.mkdir()
    path, stamp = public_cache(cache)
    body = marshal.dumps((stamp, matrix_cache.to_plain(forged_matrix("other-cuda"))))
    path.write_bytes(matrix_cache._mac(secret, body) + body)
    calls = _counting(monkeypatch)
    assert matrix_cache.load_matrix() == load() and len(calls) == 1
    assert matrix_cache.load_matrix() == load() and len(calls) == 2  # never cached
    assert path.read_bytes()[32:] == body  # not ours to rewrite either
    assert (tmp_path / "planted").exists() or problem != "a-link"


def test_a_damaged_key_is_made_again(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache.mkdir(mode=0o700)
    key = cache / matrix_cache.KEY_NAME
    key.write_bytes(b"")  # a run killed between creating and writing it
    key.chmod(0o600)
    calls = _counting(monkeypatch)
    matrix_cache.load_matrix()
    matrix_cache.load_matrix()
    assert len(key.read_bytes()) == 32 and len(calls) == 1


def _damage(kind: str, path: Path, good: bytes, tmp_path: Path) -> None:
    if kind == "garbage":
        path.write_bytes(os.urandom(5000))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif kind == "mac-only":
        path.write_bytes(good[:32])
    elif kind == "one-bit-flipped":
        flipped = bytearray(good)
        flipped[len(good) // 2] ^= 1
        path.write_bytes(bytes(flipped))
    elif kind == "huge":
        with open(path, "wb") as f:
            f.truncate(matrix_cache.MAX_CACHE_BYTES + 1)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "link-outside":
        (tmp_path / "outside").write_bytes(b"keep me")
        path.symlink_to(tmp_path / "outside")


@pytest.mark.parametrize(
    "kind",
    [
        "garbage",
        "empty",
        "truncated",
        "mac-only",
        "one-bit-flipped",
        "huge",
        "fifo",
        "link-outside",
    ],
)
def test_a_damaged_cache_is_ignored_and_rebuilt_without_a_traceback(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kind: str
) -> None:
    matrix_cache.load_matrix()
    (path,) = cache.glob("matrix-*.marshal")
    good = path.read_bytes()
    path.unlink()
    _damage(kind, path, good, tmp_path)
    calls = _counting(monkeypatch)
    assert matrix_cache.load_matrix() == load() and len(calls) == 1
    assert path.is_file() and not path.is_symlink() and path.read_bytes() == good
    assert matrix_cache.load_matrix() == load() and len(calls) == 1  # read back
    if kind == "link-outside":
        assert (tmp_path / "outside").read_bytes() == b"keep me"  # not written through
