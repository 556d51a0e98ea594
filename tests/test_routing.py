"""Several indexes (#41): extra indexes by name, routes, every file recorded by
its own URL and hash.

Two local indexes: the default one, and a stand-in for PyTorch's cu128 index
serving ``torch 2.10.0+cu128`` under its real file names with its real
METADATA (tests/fixtures/index/pytorch-cu128/README.md). Each also serves a
name the other is routed to, with other bytes (an impostor), so taking a file
from the wrong index shows in its hash. The freeze is a slice of the April
2026 Colab freeze: ``torch==2.10.0+cu128`` and its dependencies' lines, with
the tiny ``tensorflow 2.15.1`` the capture tests lock (a capture needs its
framework; the fake wheels are cp311).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote

import pytest
from fixtures.index.fakeindex import FakeIndex, closed_port, make_dist
from fixtures.index.pytorch_cu128 import (
    VERSION,
    dependency_lines,
    dependency_standins,
    torch_wheel,
)
from report_support import run_cli
from test_bootstrap_drift import bootstrap, installed
from test_lock import FW_TAG

from envlock.doctor.advice import Context, pip_fix
from envlock.errors import DataError, UsageError
from envlock.index import routing
from envlock.lock import parse_pylock, read_lock

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the fake wheels are cp311")

TORCH = torch_wheel()
IMPOSTOR = torch_wheel(marker="IMPOSTOR = True\n")  # the same name on the default index
TRITON = make_dist("triton", "3.6.0", init="BUILD = 'the pytorch index'\n")
FILELOCK_IMPOSTOR = make_dist("filelock", "3.29.0", init="IMPOSTOR = True\n")


@pytest.fixture(scope="module")
def indexes(make_module_index: Callable[..., FakeIndex]) -> tuple[FakeIndex, FakeIndex]:
    default = make_module_index()
    default.add_dist("tensorflow", "2.15.1", tag=FW_TAG)
    for wheel in dependency_standins():
        default.add(wheel)
    default.add(IMPOSTOR)
    pytorch = make_module_index()
    pytorch.add(TORCH)
    pytorch.add(torch_wheel("cp312-cp312-manylinux_2_28_x86_64"))
    pytorch.add(TRITON)
    pytorch.add(FILELOCK_IMPOSTOR)
    return default, pytorch


def _freeze(tmp_path: Path) -> Path:
    freeze = tmp_path / "freeze.txt"
    lines = ["tensorflow==2.15.1", f"torch=={VERSION}", *dependency_lines()]
    freeze.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return freeze


def _capture(default: FakeIndex, freeze: Path, out: Path, *more: str) -> tuple[int, str, str]:
    return run_cli(
        "capture", "-r", str(freeze), "--python", "3.11", "--cuda-source", "system",
        "--index-url", default.url, "-o", str(out), *more,
    )  # fmt: skip


def _packages(out: Path) -> dict[str, dict[str, object]]:
    doc = tomllib.loads((out / "pylock.toml").read_text(encoding="utf-8"))
    return {p["name"]: p for p in doc["packages"]}


def _base(index: FakeIndex) -> str:
    return index.url.removesuffix("/simple")


def test_a_cu128_capture_locks_torch_from_its_index_and_records_every_files_url(
    indexes: tuple[FakeIndex, FakeIndex], tmp_path: Path
) -> None:
    default, pytorch = indexes
    out = tmp_path / "env"
    route = ["--index", f"pytorch={pytorch.url}", "--route", "+cu128=pytorch"]
    code, stdout, err = _capture(default, _freeze(tmp_path), out, *route)
    assert code == 0, err
    assert stdout.endswith("locked 25 of 25; none left out\n"), stdout
    packages = _packages(out)
    torch = packages["torch"]
    # taken from the routed index only: its file, its hash, not the default index's impostor
    assert torch["version"] == VERSION and torch["index"] == pytorch.url
    assert torch["wheels"] == [
        {
            "name": TORCH.filename,
            "url": f"{_base(pytorch)}/files/{TORCH.filename}",
            "size": len(TORCH.data),
            "hashes": {"sha256": TORCH.sha256},
        }
    ]
    # a name both serve and not routed comes from the default index alone
    filelock = packages["filelock"]
    assert "index" not in filelock
    assert filelock["wheels"][0]["url"].startswith(f"{_base(default)}/files/")  # type: ignore[index]
    assert filelock["wheels"][0]["hashes"]["sha256"] != FILELOCK_IMPOSTOR.sha256  # type: ignore[index]
    # requirements.txt names the routed file by its URL (pip merges indexes), the rest by version
    text = (out / "requirements.txt").read_text(encoding="utf-8")
    assert (
        f"torch @ {_base(pytorch)}/files/{TORCH.filename} \\\n"
        f"    --hash=sha256:{TORCH.sha256}\n"
        "    # via --with\n"
    ) in text
    assert "\nfilelock==3.29.0 \\\n" in text
    assert f"--index pytorch={pytorch.url} --route +cu128=pytorch" in text
    # the recorded input gives the routing back; --check recomputes the same lock
    recorded = read_lock(out).input
    assert (recorded.indexes, recorded.routes) == (
        (("pytorch", pytorch.url),),
        (("+cu128", "pytorch"),),
    )
    code, stdout, err = run_cli("lock", "--check", str(out))
    assert code == 0, stdout + err
    # the recorded routing is input: one that does not hold together is refused, naming it
    text = (out / "pylock.toml").read_text(encoding="utf-8")
    damaged = text.replace('index = "pytorch"', 'index = "nope"')
    assert damaged != text
    with pytest.raises(DataError) as caught:
        parse_pylock(damaged, "pylock.toml")
    assert caught.value.message.startswith(
        "pylock.toml: tool.envlock.input: --route '+cu128=nope': names the index 'nope'"
    )
    # doctor's one-package fix installs the routed file from where it was locked too
    ctx = Context(read_lock(out), str(out), None, None, "", python="/v/bin/python")
    assert pip_fix(ctx, "torch", VERSION) == (
        "printf '%s\\n' "
        f"'torch @ {_base(pytorch)}/files/{TORCH.filename} --hash=sha256:{TORCH.sha256}' "
        "| /v/bin/python -m pip install --no-deps --require-hashes -r /dev/stdin"
    )


@pytest.mark.venv
@pytest.mark.slow  # a capture, a wheelhouse, a restore and a pip install into two venvs
def test_a_restore_from_a_wheelhouse_installs_each_file_from_where_it_was_locked(
    indexes: tuple[FakeIndex, FakeIndex], tmp_path: Path
) -> None:
    default, pytorch = indexes
    out = tmp_path / "env"
    route = ["--index", f"pytorch={pytorch.url}", "--route", "+cu128=pytorch"]
    code, _, err = _capture(default, _freeze(tmp_path), out, *route)
    assert code == 0, err
    (out / "envlock_smoke.py").write_text(
        "import json, torch\n"
        'print(json.dumps({"schema": "envlock.smoke/v1", "status": "PASSED", "checks": '
        '[{"name": "import", "status": "PASS", "reason": torch.__version__}]}))\n',
        encoding="utf-8",
    )
    torch_path = f"/files/{TORCH.filename}"
    before = (pytorch.hits[torch_path], default.hits[f"/files/{IMPOSTOR.filename}"])
    wh = tmp_path / "wh"
    code, _, err = run_cli("wheelhouse", str(out), "-o", str(wh))
    assert code == 0, err
    # every file was fetched from the URL it was locked from
    assert pytorch.hits[torch_path] == before[0] + 1
    assert default.hits[f"/files/{IMPOSTOR.filename}"] == before[1]
    locked = read_lock(out)
    for pkg in locked.packages:
        for w in pkg.wheels:
            served = pytorch if pkg.index else default
            assert served.hits[f"/files/{w.filename}"] >= 1, w.filename
    venv = tmp_path / "venv"
    dead = f"http://127.0.0.1:{closed_port()}/simple"
    code, stdout, err = run_cli(
        "restore", str(out), "--venv", str(venv), "--wheelhouse", str(wh),
        "--index-url", dead, "--allow-cpu",
    )  # fmt: skip
    assert code == 0, stdout + err
    python = venv / "bin" / "python"
    got = subprocess.run(
        [str(python), "-c", "import torch, importlib.metadata as m, json; "
         "d = m.distribution('torch'); print(json.dumps([torch.__version__, "
         "hasattr(torch, 'IMPOSTOR'), d.read_text('direct_url.json')]))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    version, impostor, direct = json.loads(got.stdout)
    assert (version, impostor) == (VERSION, False)
    # installed from the wheelhouse's copy of the file the lock names (downloaded from its URL)
    assert unquote(json.loads(direct)["url"]) == unquote((wh / TORCH.filename).absolute().as_uri())

    # a venv where torch came from its own index as PyTorch's instructions install it
    # (pip --index-url: no direct URL recorded) is captured routed the same way: torch from
    # the stand-in, by its URL (the venv's own pip and setuptools, which a capture pins too,
    # served as tiny stand-ins). A restored venv's torch was installed by URL: a capture
    # leaves such a direct install out, with its note.
    reinstall = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps",
         "--index-url", pytorch.url, f"torch=={VERSION}"],
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull}, capture_output=True, text=True,
    )  # fmt: skip
    assert reinstall.returncode == 0, reinstall.stderr
    for name in ("pip", "setuptools"):
        have = installed(venv, skip=())
        if name in have and not any(w.startswith(f"{name}-{have[name]}-") for w in default.wheels):
            default.add(make_dist(name, have[name]))
    again = tmp_path / "again"
    code, _, err = run_cli(
        "capture", "--venv", str(venv), "--cuda-source", "system", "--index-url", default.url,
        *route, "-o", str(again),
    )  # fmt: skip
    assert code == 0, err
    assert _packages(again)["torch"]["index"] == pytorch.url
    assert _packages(again)["torch"]["wheels"] == _packages(out)["torch"]["wheels"]

    # requirements.txt's own install line, as printed, with pip (which merges indexes):
    # the routed file comes from its URL, every other one from the configured index
    header = (out / "requirements.txt").read_text(encoding="utf-8")
    assert "#   pip install --require-hashes --no-deps -r requirements.txt\n" in header
    plain = tmp_path / "plain"
    subprocess.run([sys.executable, "-m", "venv", str(plain)], check=True)
    hits = pytorch.hits[torch_path]
    env = {**os.environ, "PIP_INDEX_URL": default.url, "PIP_CONFIG_FILE": os.devnull}
    subprocess.run(
        [str(plain / "bin" / "pip"), "install", "--require-hashes", "--no-deps", "-r",
         "requirements.txt"],
        cwd=out, env=env, check=True, capture_output=True,
    )  # fmt: skip
    assert pytorch.hits[torch_path] == hits + 1
    assert default.hits[f"/files/{IMPOSTOR.filename}"] == before[1]
    shown = subprocess.run(
        [str(plain / "bin" / "python"), "-c", "import torch; print(torch.__version__, "
         "hasattr(torch, 'IMPOSTOR'))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert shown.stdout == f"{VERSION} False\n"

    # bootstrap.sh tracks the routed package too: gone from the venv, it is named and put back
    boot = tmp_path / "boot"
    first = bootstrap(out, default.url, "--no-smoke", "--venv", str(boot))
    assert first.returncode == 0, first.stdout + first.stderr
    pip = [str(boot / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "uninstall", "-y", "torch"], check=True)
    second = bootstrap(out, default.url, "--no-smoke", "--venv", str(boot))
    assert second.returncode == 0, second.stdout + second.stderr
    lines = second.stdout.splitlines()
    at = lines.index(
        "bootstrap: the venv differs from the lock (1 packages); "
        "installing the locked versions again:"
    )
    assert lines[at + 1] == f"  torch {VERSION}: missing"
    assert installed(boot)["torch"] == VERSION


def test_a_lock_routes_a_name_pulled_in_by_another_and_records_no_credentials(
    indexes: tuple[FakeIndex, FakeIndex], tmp_path: Path
) -> None:
    default, pytorch = indexes
    out = tmp_path / "env"
    secret_url = pytorch.url.replace("http://", "http://someone:s3cr3t@")
    code, stdout, err = run_cli(
        "lock", "tensorflow==2.15.1", "--python", "3.11", "--cuda-source", "system",
        "--with", f"torch=={VERSION}", "--index-url", default.url,
        "--index", f"pytorch={secret_url}", "--route", "+cu128=pytorch",
        "--route", "triton=pytorch", "-o", str(out),
    )  # fmt: skip
    assert code == 0, stdout + err
    packages = _packages(out)
    # triton is torch's dependency, not a line of the input: routed all the same
    assert packages["triton"]["index"] == pytorch.url
    assert packages["triton"]["wheels"][0]["hashes"]["sha256"] == TRITON.sha256  # type: ignore[index]
    assert packages["torch"]["wheels"][0]["hashes"]["sha256"] == TORCH.sha256  # type: ignore[index]
    for path in out.rglob("*"):
        if path.is_file():
            assert b"s3cr3t" not in path.read_bytes() and b"someone" not in path.read_bytes(), path
    assert "s3cr3t" not in stdout + err


@pytest.mark.parametrize(
    ("flags", "code", "said"),
    [
        (
            ["--index", "pytorch={pytorch}", "--route", "+cu128=pt"],
            2,
            "--route '+cu128=pt': names the index 'pt', which no --index gives "
            "(indexes given: pytorch)",
        ),
        (
            ["--index", "pytorch={pytorch}"],
            2,
            "--index pytorch: no --route sends a package to it",
        ),
        (
            ["--index", "pytorch={dead}", "--route", "+cu128=pytorch"],
            3,
            "{dead}",
        ),
        (
            [
                "--index",
                "pytorch={pytorch}",
                "--route",
                "+cu128=pytorch",
                "--route",
                "jinja2=pytorch",
            ],
            2,
            "1 routed line(s) are not on the index they are routed to, and a routed package is "
            "taken from that index only (never from another that has the name):\n"
            "  jinja2==3.1.6: not served by the index pytorch at {pytorch} (its --route)",
        ),
    ],
    ids=["route-to-no-index", "index-without-route", "index-down", "not-on-its-index"],
)
def test_bad_routing_is_one_message_and_nothing_written(
    indexes: tuple[FakeIndex, FakeIndex], tmp_path: Path, flags: list[str], code: int, said: str
) -> None:
    default, pytorch = indexes
    dead = f"http://127.0.0.1:{closed_port()}/simple"
    given = [f.format(pytorch=pytorch.url, dead=dead) for f in flags]
    out = tmp_path / "env"
    got, stdout, err = _capture(default, _freeze(tmp_path), out, *given)
    assert got == code, stdout + err
    assert said.format(pytorch=pytorch.url, dead=dead) in err
    assert err.count("envlock: error: ") == 1 and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())


def test_a_lock_whose_extra_index_is_down_is_exit_3_naming_it(
    indexes: tuple[FakeIndex, FakeIndex], tmp_path: Path
) -> None:
    default, _ = indexes
    dead = f"http://127.0.0.1:{closed_port()}/simple"
    out = tmp_path / "env"
    code, _, err = run_cli(
        "lock", "tensorflow==2.15.1", "--python", "3.11", "--cuda-source", "system",
        "--with", f"torch=={VERSION}", "--index-url", default.url,
        "--index", f"pytorch={dead}", "--route", "+cu128=pytorch", "-o", str(out),
    )  # fmt: skip
    assert code == 3, err
    assert err.startswith(f"envlock: error: cannot reach the package index at {dead}: ")
    assert "(an extra index, from --index)" in err and "--index URL" in err
    assert not out.exists() or not any(out.iterdir())


def test_a_lock_takes_a_routed_name_only_from_its_index_even_where_the_default_has_it(
    indexes: tuple[FakeIndex, FakeIndex], tmp_path: Path
) -> None:
    """jinja2 is on the default index and not on the one it is routed to: the lock
    fails naming it and its index, rather than take it from the default one."""
    default, pytorch = indexes
    out = tmp_path / "env"
    code, _, err = run_cli(
        "lock", "tensorflow==2.15.1", "--python", "3.11", "--cuda-source", "system",
        "--with", f"torch=={VERSION}", "--index-url", default.url,
        "--index", f"pytorch={pytorch.url}", "--route", "+cu128=pytorch",
        "--route", "jinja2=pytorch", "-o", str(out),
    )  # fmt: skip
    assert code == 2, err
    assert err == (
        "envlock: error: 1 routed package(s) are not on the index they are routed to (or not "
        "at the version asked), and a routed package is taken from that index only (never "
        "from another that has the name):\n"
        f"  jinja2: not served by the index pytorch at {pytorch.url} (its --route)\n"
        "  hint: check the --index URL and the --route rules\n"
    )
    assert not out.exists() or not any(out.iterdir())


def test_the_lock_command_refuses_a_route_with_the_pip_resolver(
    indexes: tuple[FakeIndex, FakeIndex], tmp_path: Path
) -> None:
    default, pytorch = indexes
    code, _, err = run_cli(
        "lock", "tensorflow==2.15.1", "--python", "3.11", "--resolver", "pip",
        "--with", f"torch=={VERSION}", "--index-url", default.url,
        "--index", f"pytorch={pytorch.url}", "--route", "+cu128=pytorch", "-o", str(tmp_path / "e"),
    )  # fmt: skip
    assert code == 2
    assert "--route needs --resolver uv: pip merges its indexes" in err


@pytest.mark.parametrize(
    ("indexes", "routes", "said"),
    [
        (["a=https://x.example/simple"], ["torch=a", "torch=b"], "names the index 'b'"),
        (
            ["a=https://x.example/s", "b=https://y.example/s"],
            ["torch=a", "torch=b"],
            "routed to two",
        ),
        (["a b=https://x.example/s"], ["torch=a"], "not NAME=URL"),
        (["a=ftp://x.example/s"], ["torch=a"], "is not an http(s) or file URL"),
        (["a=https://x.example/s?token=abc"], ["torch=a"], "carries a credential in its query"),
        (["a=https://x.example/s"], ["+CU 128=a"], "neither a project name nor a local version"),
        (["a=https://x.example/s", "a=https://y.example/s"], ["torch=a"], "named twice"),
    ],
)
def test_routing_flags_are_validated(indexes: list[str], routes: list[str], said: str) -> None:
    with pytest.raises(UsageError, match=None) as caught:
        routing.parse(indexes, routes)
    assert said in caught.value.message
    assert "abc" not in caught.value.message


def test_a_name_route_wins_over_a_label_route_and_labels_route_only_pinned_lines() -> None:
    r = routing.parse(
        ["a=https://x.example/simple", "b=https://y.example/simple"],
        ["+cu128=a", "torchvision,Torch_Audio=b"],
    )
    assert r.index_for("torch", "2.10.0+cu128") == routing.ExtraIndex(
        "a", "https://x.example/simple"
    )
    assert r.index_for("torch-audio", "2.10.0+cu128") == routing.ExtraIndex(
        "b", "https://y.example/simple"
    )
    assert r.index_for("torch", "2.10.0") is None
    assert r.routed(["torch==2.10.0+cu128", "numpy==2.0", "jax>=0.4"]) == {
        "torch": routing.ExtraIndex("a", "https://x.example/simple"),
        "torchvision": routing.ExtraIndex("b", "https://y.example/simple"),
        "torch-audio": routing.ExtraIndex("b", "https://y.example/simple"),
    }
