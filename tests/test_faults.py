"""Faults of the package index, through every envlock path that talks to one.

The local index (tests/fixtures/index/fakeindex.py) serves a fault before the
real answer: a 503, a stall past the client's timeout, a connection reset, a
truncated body (Content-Length larger than what is sent), other bytes than the
file whose sha256 the page lists ("wrong-hash"), or a 200 with the whole file
to a Range request. For each path (the PEP 691 listing, the refresh's range
reads of wheels, ``envlock lock`` with uv and with pip) a fault served once is
retried and the run succeeds; a fault that persists is a clear exit 3 naming
what failed, and the output (matrix file, bundle folder) is byte for byte as
before, with no temp file left. A wrong hash is never accepted: exit 3, or a
lock that records the sha256 the index lists (never one of the bytes served).

Why exit 3 for a hash mismatch, not 1: exit 1 is a check the user asked for
that found their artifact wrong (verify, doctor, lock --check); here the
input was right and the environment (the index, a proxy, the network)
delivered bytes that are not the file it lists. The run stops and writes
nothing; trying again, or another index, is the fix.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from fixtures.index.fakeindex import FakeIndex, flipped
from test_matrix_refresh import _wheel, build_index

from envlock.cli import main
from envlock.errors import EnvironmentFailure
from envlock.index import http, pep691
from envlock.lock import pip as pip_engine
from envlock.lock import uv as uv_engine
from envlock.lockplatform import Target

PAGE = "/simple/dep-a/"
TRANSIENT = ["stall", "reset", "truncate", 503]
REASON = {
    "stall": "timed out after 0.5 s",
    "reset": "the connection was reset",
    "truncate": "the connection broke off in the middle of the answer",
    503: "HTTP 503 Service Unavailable",
}


@pytest.fixture(autouse=True)
def fast_http(monkeypatch: pytest.MonkeyPatch) -> None:
    """Short timeouts and backoff, two retries: three tries in all."""
    monkeypatch.setenv("ENVLOCK_HTTP_TIMEOUT", "0.5")
    monkeypatch.setenv("ENVLOCK_HTTP_BACKOFF", "0.01")
    monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", "2")


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too) with its bytes."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


# ------------------------------------------------------------ the PEP 691 listing


@pytest.fixture
def dep_index(make_index: Callable[..., FakeIndex]) -> FakeIndex:
    idx = make_index(stall_seconds=2.0)
    idx.add_dist("dep-a", "1.0")
    idx.add_dist("dep-a", "1.5")
    return idx


@pytest.mark.parametrize("fault", TRANSIENT)
def test_listing_retries_a_fault_served_once(dep_index: FakeIndex, fault: int | str) -> None:
    dep_index.faults[PAGE] = [fault]
    files = pep691.project_files(http.session(), dep_index.url, "dep-a")
    assert files is not None
    assert [f.filename for f in files] == [
        "dep_a-1.0-py3-none-any.whl",
        "dep_a-1.5-py3-none-any.whl",
    ]
    assert dep_index.served == [(PAGE, fault)]
    assert dep_index.hits[PAGE] == 2  # the fault, then the answer


@pytest.mark.parametrize("fault", TRANSIENT)
def test_listing_gives_up_after_its_retries_with_exit_3(
    dep_index: FakeIndex, fault: int | str
) -> None:
    dep_index.faults[PAGE] = [fault] * 5
    with pytest.raises(EnvironmentFailure) as err:
        pep691.project_files(http.session(), dep_index.url, "dep-a")
    assert err.value.exit_code == 3
    assert err.value.message.startswith(f"cannot reach the package index at {dep_index.url}: ")
    assert REASON[fault] in err.value.message
    assert PAGE in err.value.message  # names what failed
    assert dep_index.hits[PAGE] == 3  # first try + ENVLOCK_HTTP_RETRIES=2


# ------------------------------------------------------------ the refresh's range reads


@pytest.fixture
def tf_index(make_index: Callable[..., FakeIndex]) -> FakeIndex:
    return build_index(make_index(stall_seconds=2.0))


WHEEL = f"/files/{_wheel('2.15.1', '311')}"


def _refresh(idx: FakeIndex, out: Path) -> int:
    return main(["matrix", "refresh", "--index-url", idx.url, "-o", str(out), "--jobs", "2"])


@pytest.mark.parametrize("fault", TRANSIENT)
def test_refresh_retries_a_fault_on_a_wheel_range_read(
    tf_index: FakeIndex, fault: int | str, tmp_path: Path
) -> None:
    clean = tmp_path / "clean.toml"
    assert _refresh(tf_index, clean) == 0
    tf_index.faults[WHEEL] = [fault]
    out = tmp_path / "tf.toml"
    assert _refresh(tf_index, out) == 0
    assert tf_index.served == [(WHEEL, fault)]
    assert out.read_bytes() == clean.read_bytes()  # the same matrix as without the fault


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        *REASON.items(),
        ("ignore-range", "ignores HTTP range requests (it answered 200 with the whole file"),
        ("wrong-hash", "not a readable wheel: "),
    ],
)
def test_refresh_gives_up_with_exit_3_and_leaves_the_matrix_file(
    tf_index: FakeIndex,
    fault: int | str,
    reason: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "tf.toml"
    out.write_text("earlier matrix\n", encoding="utf-8")
    before = snapshot(tmp_path)
    tf_index.faults[WHEEL] = [fault] * 9
    assert _refresh(tf_index, out) == 3
    err = capsys.readouterr().err
    assert reason in err and "hint:" in err and "Traceback" not in err
    assert WHEEL.rsplit("/", 1)[1] in err  # names the wheel
    assert snapshot(tmp_path) == before  # the file as it was, no temp file


def test_a_wheel_whose_bytes_are_not_the_listed_file_is_refused_where_read(
    tf_index: FakeIndex, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The member read fails its CRC: the served bytes are not the file's."""
    tf_index.faults[WHEEL] = ["wrong-hash"] * 9
    assert _refresh(tf_index, tmp_path / "tf.toml") == 3
    err = capsys.readouterr().err
    assert "fails its CRC check (the bytes served are not the file's)" in err
    assert "the file server sent damaged or other bytes" in err
    assert not (tmp_path / "tf.toml").exists()


def test_refresh_refuses_a_file_of_another_size_than_listed(
    tf_index: FakeIndex, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    name = WHEEL.rsplit("/", 1)[1]
    listed = len(tf_index.wheels[name].data)
    page = tf_index.page("tensorflow")
    assert page is not None and f'"size": {listed}' in page.decode()
    tf_index.wheels[name].data += (
        b"\0" * 10
    )  # the file grew; the page below still lists the old size
    original_page = tf_index.page

    def stale_page(project: str) -> bytes | None:
        text = original_page(project)
        if text is None or project != "tensorflow":
            return text
        return text.replace(f'"size": {listed + 10}'.encode(), f'"size": {listed}'.encode())

    tf_index.page = stale_page  # type: ignore[method-assign]
    assert _refresh(tf_index, tmp_path / "tf.toml") == 3
    err = capsys.readouterr().err
    assert f"serves {listed + 10} bytes for" in err and f"the index lists {listed}" in err


# ------------------------------------------------------------ envlock lock (uv and pip)


@pytest.fixture
def lock_index(make_index: Callable[..., FakeIndex]) -> FakeIndex:
    """A tiny 'tensorflow' 2.15.1, so the real resolve of tensorflow==2.15 locks from 127.0.0.1."""
    idx = make_index(stall_seconds=3.0)
    idx.add_dist(
        "tensorflow", "2.15.1", tag="py3-none-manylinux_2_17_x86_64", requires=("dep-a>=1,<2",)
    )
    for v in ("1.0", "1.5"):
        idx.add_dist("dep-a", v)
    return idx


def _lock(idx: FakeIndex, out: Path, resolver: str, *extra: str) -> int:
    return main(
        ["lock", "tensorflow==2.15", "--index-url", idx.url, "-o", str(out)]
        + ["--resolver", resolver, *extra]
    )


@pytest.fixture
def earlier_bundle(
    lock_index: FakeIndex,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Path:
    """A bundle from a clean lock; the fault runs lock --with dep-a==1.0 over it."""
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache-first"))
    out = tmp_path / "env"
    assert _lock(lock_index, out, "uv") == 0
    capsys.readouterr()
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache-second"))  # uv asks again
    return out


@pytest.mark.parametrize("resolver", ["uv", "pip"])
@pytest.mark.parametrize("fault", TRANSIENT)
def test_lock_retries_a_page_fault_served_once(
    lock_index: FakeIndex,
    earlier_bundle: Path,
    resolver: str,
    fault: int | str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if resolver == "pip" and fault == "truncate":
        pytest.skip("pip does not retry a body that breaks off: see the exit-3 test below")
    lock_index.faults[PAGE] = [fault]
    assert _lock(lock_index, earlier_bundle, resolver, "--with", "dep-a==1.0") == 0, (
        capsys.readouterr().err
    )
    assert lock_index.served == [(PAGE, fault)]
    assert "dep-a==1.0" in (earlier_bundle / "requirements.txt").read_text(encoding="utf-8")


def _fails_and_leaves_the_bundle(
    idx: FakeIndex, bundle: Path, resolver: str, capsys: pytest.CaptureFixture[str]
) -> str:
    before = snapshot(bundle.parent)
    code = _lock(idx, bundle, resolver, "--with", "dep-a==1.0")
    err = capsys.readouterr().err
    assert code == 3, err
    assert err.startswith("envlock: error: ") and "hint:" in err and "Traceback" not in err
    after = snapshot(bundle.parent)
    # uv's cache may have been filled; the bundle is byte for byte as before
    keep = {k: v for k, v in after.items() if not k.startswith("uv-cache")}
    assert keep == {k: v for k, v in before.items() if not k.startswith("uv-cache")}
    return err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("resolver", "fault", "reason"),
    [
        ("uv", "reset", "Connection reset by peer"),
        ("uv", "truncate", "end of file before message length reached"),
        ("uv", 503, "503"),
        ("uv", "stall", "timed out"),
        ("pip", "reset", "pip gave up on /simple/dep-a/ after its retries (the connection was"),
        ("pip", "stall", "pip gave up on /simple/dep-a/ after its retries (timed out)"),
        ("pip", "truncate", "pip crashed reading the package index at "),
    ],
)
def test_lock_gives_up_on_a_page_with_exit_3_and_leaves_the_bundle(
    lock_index: FakeIndex,
    earlier_bundle: Path,
    resolver: str,
    fault: int | str,
    reason: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lock_index.faults[PAGE] = [fault] * 20
    err = _fails_and_leaves_the_bundle(lock_index, earlier_bundle, resolver, capsys)
    if reason.startswith("pip crashed"):  # pip reads the cut page without noticing
        assert f"envlock: error: {reason}{lock_index.url}: json.decoder.JSONDecodeError" in err
        assert "truncated or damaged answer" in err
    else:
        assert f"envlock: error: cannot reach the package index at {lock_index.url}: " in err
        assert reason in err


def test_pip_refuses_a_wheel_whose_bytes_are_not_the_listed_file(
    lock_index: FakeIndex, earlier_bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "dep_a-1.0-py3-none-any.whl"
    lock_index.faults[f"/files/{name}"] = ["wrong-hash"] * 5
    err = _fails_and_leaves_the_bundle(lock_index, earlier_bundle, "pip", capsys)
    listed = lock_index.wheels[name].sha256
    served = hashlib.sha256(flipped(lock_index.wheels[name].data)).hexdigest()
    assert (
        f"envlock: error: the package index at {lock_index.url} served {name} with other bytes "
        f"than the file it lists (listed sha256 {listed}, got {served}); it was refused and "
        "nothing was locked\n"
    ) in err


def test_uv_never_records_the_hash_of_bytes_it_was_served(
    lock_index: FakeIndex, earlier_bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """uv reads only the metadata of a wheel: the lock records what the index lists,
    which is what an install from the lock checks the downloaded file against."""
    name = "dep_a-1.0-py3-none-any.whl"
    lock_index.faults[f"/files/{name}"] = ["wrong-hash"] * 5
    code = _lock(lock_index, earlier_bundle, "uv", "--with", "dep-a==1.0")
    err = capsys.readouterr().err
    listed = lock_index.wheels[name].sha256
    served = hashlib.sha256(flipped(lock_index.wheels[name].data)).hexdigest()
    text = "\n".join(p.read_text(encoding="utf-8") for p in earlier_bundle.glob("*.t*"))
    assert served not in text
    if code == 0:
        assert f"--hash=sha256:{listed}" in (earlier_bundle / "requirements.txt").read_text()
    else:
        assert code == 3, err


# ------------------------------------------------------------ one set of HTTP settings


def test_the_pip_listing_honours_envlock_http_retries(
    dep_index: FakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envlock.lock.pip_files import fetch_files

    dep_index.faults[PAGE] = [503] * 3
    with pytest.raises(EnvironmentFailure, match="HTTP 503"):
        fetch_files(dep_index.url, ["dep-a"])  # ENVLOCK_HTTP_RETRIES=2: 3 tries
    assert dep_index.hits[PAGE] == 3
    monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", "3")
    dep_index.faults[PAGE] = [503] * 3
    files = fetch_files(dep_index.url, ["dep-a"])
    assert len(files["dep-a"]) == 2 and dep_index.hits[PAGE] == 3 + 4


def test_uv_and_pip_get_envlock_http_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOCK_HTTP_TIMEOUT", "2.5")
    monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", "7")
    env = uv_engine.uv_env()
    assert (env["UV_HTTP_TIMEOUT"], env["UV_HTTP_RETRIES"]) == ("3", "7")
    cmd = pip_engine.dry_run_command(
        "r.json", "/tmp/w", Target.for_lock("3.11", "ubuntu22.04"), "http://x/s"
    )
    assert cmd[cmd.index("--retries") + 1] == "7" and cmd[cmd.index("--timeout") + 1] == "2.5"
    monkeypatch.delenv("ENVLOCK_HTTP_TIMEOUT")
    monkeypatch.delenv("ENVLOCK_HTTP_RETRIES")
    monkeypatch.delenv("UV_HTTP_RETRIES", raising=False)
    monkeypatch.setenv("UV_HTTP_TIMEOUT", "99")  # the user's own uv setting stays
    env = uv_engine.uv_env()
    assert env["UV_HTTP_TIMEOUT"] == "99" and "UV_HTTP_RETRIES" not in env


def test_fake_index_faults_are_what_they_say(dep_index: FakeIndex) -> None:
    """The fixture itself: each fault is seen by a plain client as named."""
    import requests

    base = dep_index.url.rsplit("/simple", 1)[0]
    name = "dep_a-1.0-py3-none-any.whl"
    data = dep_index.wheels[name].data
    path = f"/files/{name}"
    dep_index.faults[path] = ["wrong-hash", "ignore-range", "truncate", "reset"]
    got = requests.get(base + path, timeout=5).content
    assert len(got) == len(data) and got != data and got == flipped(data)
    whole = requests.get(base + path, headers={"Range": "bytes=0-9"}, timeout=5)
    assert whole.status_code == 200 and whole.content == data
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        requests.get(base + path, timeout=5).content  # noqa: B018
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(base + path, timeout=5)
    assert json.loads(requests.get(base + PAGE, timeout=5, headers={"Accept": pep691.ACCEPT}).text)


def test_an_os_error_no_stage_named_is_exit_3_naming_the_path(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38 ("every OSError that reaches cli.main is exit 3 with the path"):
    the disk-full traceback of the undo save (break 9) was one of a class; what a
    stage does not turn into its own message still never shows a traceback."""
    import errno

    import envlock.commands.resolve as resolve_command

    def full(args: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device", "/srv/env/pylock.toml")

    monkeypatch.setattr(resolve_command, "run", full)
    assert main(["resolve", "tensorflow==2.15"]) == 3
    assert capsys.readouterr().err == (
        "envlock: error: No space left on device: /srv/env/pylock.toml\n"
        "  hint: check the disk space and the permissions of that path, then run again\n"
    )
