"""envlock capture of any interpreter (#22) and DIR/captured.json (#20).

--venv takes what envlock doctor --venv takes: a venv folder or an interpreter
file. The system interpreter here is the real, non-venv CPython this test
suite's venv was made from (sys.base_prefix), with a ``--user`` site
(PYTHONUSERBASE) that holds the fake TensorFlow; the fake index serves every
distribution that interpreter lists, at the versions it lists (read from it
here, not written down). A freeze's ``name @ URL`` and ``-e`` lines are left
out of the lock with one note each.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from fixtures.index.fakeindex import FakeIndex
from report_support import run_cli
from test_capture import UV, _fill, make_venv

from envlock.bundle import origin

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the fake wheels are cp311")

SYSTEM = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"


@pytest.fixture(scope="module")
def full(make_module_index: Callable[..., FakeIndex]) -> FakeIndex:
    return _fill(make_module_index(), ("1.1", "1.2", "1.3"))


@pytest.fixture(scope="module")
def gone(make_module_index: Callable[..., FakeIndex]) -> FakeIndex:
    """dep-a 1.2 is no longer on this index."""
    return _fill(make_module_index(), ("1.1", "1.3"))


def _captured_json(folder: Path) -> dict[str, object]:
    """captured.json without its MAC, which must be there and match this user's key
    (envlock.bundle.origin: only then is it a default target)."""
    doc: dict[str, object] = json.loads((folder / "captured.json").read_text(encoding="utf-8"))
    mac = doc.pop("mac")
    assert isinstance(mac, str) and len(mac) == 64
    found = origin.read(folder)
    assert found is not None and found.verified and found.here()
    return doc


def _metadata(python: Path, env: dict[str, str]) -> dict[str, str]:
    """What ``python``'s importlib.metadata lists: {canonical name: version}."""
    code = (
        "import json, re; from importlib import metadata as m; print(json.dumps("
        "{re.sub(r'[-_.]+', '-', d.metadata['Name']).lower(): d.version "
        "for d in m.distributions() if d.metadata['Name']}))"
    )
    out = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=True, env=env, cwd="/"
    )
    found: dict[str, str] = json.loads(out.stdout)
    return found


@pytest.fixture(scope="module")
def system_python(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a real non-venv CPython 3.11, a PYTHONUSERBASE whose --user site is empty)."""
    if not SYSTEM.is_file() or (SYSTEM.parent.parent / "pyvenv.cfg").exists():
        pytest.skip(f"no non-venv CPython at {SYSTEM}")
    base = tmp_path_factory.mktemp("userbase")
    env = {**os.environ, "PYTHONUSERBASE": str(base)}
    code = "import site; print(site.ENABLE_USER_SITE, site.getusersitepackages())"
    site = subprocess.run(
        [str(SYSTEM), "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout.split()
    if site[0] != "True":
        pytest.skip(f"{SYSTEM} has no --user site here")
    Path(site[1]).mkdir(parents=True)
    return SYSTEM, Path(site[1])


@pytest.mark.venv
def test_capture_of_a_system_interpreter_with_a_user_site(
    system_python: tuple[Path, Path],
    make_index: Callable[..., FakeIndex],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    python, user_site = system_python
    monkeypatch.setenv("PYTHONUSERBASE", str(user_site.parents[2]))
    own = _metadata(python, dict(os.environ))  # its own site (the --user one is empty)
    index = _fill(make_index(), ("1.2",))
    for name, version in own.items():  # served as they are installed
        index.add_dist(name, version)
    # a --user upgrade of one of its own: listed twice, the --user one imports
    shadowed = sorted(set(own) - {"pip", "setuptools", "wheel"})[0]
    index.add_dist(shadowed, "0.0.1")
    subprocess.run(
        [UV, "pip", "install", "-q", "--python", str(python), "--target", str(user_site),
         "--index-url", index.url, "--no-deps", "tensorflow==2.15.1", "dep-a==1.2", "dep-c==1.0",
         f"{shadowed}==0.0.1"],
        check=True,
    )  # fmt: skip
    assert _metadata(python, dict(os.environ))["tensorflow"] == "2.15.1"  # the --user site counts
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    # PYTHONPATH is this shell's, not the interpreter's: capture leaves it out
    intruder = tmp_path / "pythonpath" / "intruder-9.9.dist-info"
    intruder.mkdir(parents=True)
    (intruder / "METADATA").write_text("Metadata-Version: 2.1\nName: intruder\nVersion: 9.9\n")
    monkeypatch.setenv("PYTHONPATH", str(intruder.parent))

    out = tmp_path / "env"
    code, stdout, err = run_cli(
        "capture", "--venv", str(python), "-o", str(out), "--index-url", index.url, "--json"
    )
    assert code == 0, err
    data = json.loads(stdout)
    captured = data["captured"]
    assert (captured["interpreter"], captured["venv"]) == (str(python), None)
    assert captured["python"] == ".".join(map(str, sys.version_info[:3]))
    want = {**own, "dep-a": "1.2", "dep-c": "1.0", shadowed: "0.0.1"}
    assert captured["pins"] == [f"{n}=={v}" for n, v in sorted(want.items())]
    assert "intruder" not in stdout
    assert (
        f"{shadowed} {own[shadowed]} (in {purelib}) is shadowed by {shadowed} 0.0.1 (in "
        f"{user_site}), the one that imports: that one is captured"
    ) in data["notes"]
    locked = {p["name"]: p["version"] for p in data["packages"]}
    assert locked == {**want, "tensorflow": "2.15.1"} and data["differs"] == []
    assert data["origin"] == _captured_json(out)
    code, stdout, err = run_cli(
        "capture", "--venv", str(python), "-o", str(out), "--index-url", index.url
    )
    assert code == 0, err
    assert (
        f"wrote {out / 'captured.json'}: captured from {python} (outside a venv); doctor of "
        "this bundle inspects it, restore --in-place syncs it on this machine\n"
    ) in stdout
    assert _captured_json(out) == {
        "schema": 1,
        "interpreter": str(python),
        "venv": None,
        "python": captured["python"],
        "platform": origin.read(out).platform,  # type: ignore[union-attr]
        "machine": origin.machine_id(),
    }
    assert origin.read(out).platform.startswith("Linux x86_64, glibc ")  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def venv(full: FakeIndex, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(
        tmp_path_factory.mktemp("v") / "venv",
        full,
        "tensorflow==2.15.1",
        "dep-a==1.2",
        "dep-c==1.0",
    )


@pytest.mark.venv
def test_capture_given_a_venvs_bin_python(venv: Path, full: FakeIndex, tmp_path: Path) -> None:
    """The venv's interpreter file is the venv: same pins, and captured.json keeps
    the link as given (not resolved to the base Python) with the venv beside it."""
    link = venv / "bin" / "python"
    assert link.is_symlink()
    out = tmp_path / "env"
    code, stdout, err = run_cli(
        "capture", "--venv", str(link), "-o", str(out), "--index-url", full.url, "--json"
    )
    assert code == 0, err
    data = json.loads(stdout)
    assert data["captured"]["pins"] == ["dep-a==1.2", "dep-c==1.0"]
    assert (data["captured"]["interpreter"], data["captured"]["venv"]) == (str(link), str(venv))
    record = _captured_json(out)
    assert (record["interpreter"], record["venv"]) == (str(link), str(venv))
    assert record["machine"] == origin.machine_id()

    # the venv folder gives the same record, captured again into the same DIR (its
    # captured.json is envlock's: no --force); printed (not --json) it says where from
    code, stdout, err = run_cli(
        "capture", "--venv", str(venv), "-o", str(out), "--index-url", full.url
    )
    assert code == 0, err
    assert _captured_json(out) == record
    assert f"captured tensorflow 2.15.1 and 2 other distributions from {venv}" in stdout
    assert (
        f"wrote {out / 'captured.json'}: captured from {link} (the venv {venv}); doctor and "
        "restore of this bundle act on it on this machine\n"
    ) in stdout
    code, _, err = run_cli("lock", "--check", str(out), "--index-url", full.url)
    assert code == 0, err  # captured.json is outside the manifest
    # and doctor, given the bundle, inspects the environment that was captured
    code, stdout, err = run_cli("doctor", "--lock", str(out), "--allow-cpu", "--json")
    assert json.loads(stdout)["interpreter"] == {
        "python": str(link),
        "chosen_by": "captured",
        "reason": f"the venv {out} was captured from ({venv}, {out / 'captured.json'})",
    }, err


@pytest.mark.venv
def test_a_dangling_interpreter_is_doctors_finding(full: FakeIndex, tmp_path: Path) -> None:
    """The Python a venv was made from is gone (bin/python -> python3.11 -> it):
    given as the folder or as its bin/python, the same finding doctor gives, exit 1."""
    broken = make_venv(tmp_path / "broken", full, "dep-c==1.0")
    link = broken / "bin" / "python"
    points_to = os.readlink(link)
    (broken / "bin" / points_to).unlink()  # python3.11 -> the base interpreter, now gone
    (broken / "bin" / points_to).symlink_to(tmp_path / "uninstalled" / "python3.11")
    for given in (broken, link):
        code, stdout, err = run_cli("capture", "--venv", str(given), "-o", str(tmp_path / "env"))
        assert code == 1, err
        assert f"{link} is a link to {points_to}, which no longer exists" in err
        assert f"python3 -m venv --clear {broken}" in err
        assert "Traceback" not in err and not (tmp_path / "env" / "pylock.toml").exists()
    # a dangling link that is no venv's: bad input, named as such
    stray = tmp_path / "python3"
    stray.symlink_to(tmp_path / "nowhere")
    code, _, err = run_cli("capture", "--venv", str(stray), "-o", str(tmp_path / "env"))
    assert code == 2
    assert f"--venv {stray} is a link to {tmp_path / 'nowhere'}, which no longer exists" in err


@pytest.mark.venv
def test_a_failed_capture_leaves_the_earlier_captured_json(
    venv: Path, gone: FakeIndex, tmp_path: Path
) -> None:
    newer = make_venv(tmp_path / "newer", gone, "tensorflow==2.15.1", "dep-a==1.3", "dep-c==1.0")
    out = tmp_path / "env"
    code, _, err = run_cli("capture", "--venv", str(newer), "-o", str(out), "--index-url", gone.url)
    assert code == 0, err
    before = (out / "captured.json").read_bytes()
    assert json.loads(before)["venv"] == str(newer)
    # venv holds dep-a 1.2, which this index no longer has: the lock fails after the probe
    code, _, err = run_cli("capture", "--venv", str(venv), "-o", str(out), "--index-url", gone.url)
    assert code == 2
    assert "dep-a==1.2: no wheel of 1.2 for CPython 3.11" in err
    # the hint's commands run as they stand: a freeze of that interpreter, then capture -r
    python = venv / "bin" / "python"
    assert f"{python} -m pip freeze --all > freeze.txt, edit freeze.txt, then run envlock " \
        f"capture -r freeze.txt --python 3.11 -o {out}" in err  # fmt: skip
    assert (out / "captured.json").read_bytes() == before


def test_capture_of_a_freeze_leaves_direct_installs_out_with_a_note(
    full: FakeIndex, tmp_path: Path
) -> None:
    lines = {
        "google-colab @ file:///colabtools/dist/google-colab-1.0.0.tar.gz":
            "installed from a local file: no index serves it",
        "-e /content/mylib": "an editable install of a local checkout: no index serves it",
        "-e git+https://example.invalid/tools.git@0123abc#egg=tools":
            "an editable VCS checkout: no index serves that build",
        "fromgit @ git+https://example.invalid/fromgit.git@v1":
            "installed from a VCS checkout: the index's build of that version, if any, differs",
        "dep-c @ https://example.invalid/wheels/dep_c-1.0-py3-none-any.whl":
            "installed from a URL: the index's build of that version, if any, may differ",
    }  # fmt: skip
    freeze = tmp_path / "freeze.txt"
    freeze.write_text(
        "dep-a==1.1\n# Editable install with no version control (mylib==0.1)\n"
        + "\n".join(lines)
        + "\ntensorflow==2.15.1\n",
        encoding="utf-8",
    )
    out = tmp_path / "env"
    out.mkdir()
    (out / "captured.json").write_text("{}\n")  # from an earlier capture: it would now lie
    argv = ["capture", "-r", str(freeze), "--python", "3.11", "-o", str(out),
            "--cuda-source", "system", "--index-url", full.url]  # fmt: skip
    code, stdout, err = run_cli(*argv, "--json")
    assert code == 0, err
    data = json.loads(stdout)
    # dep-c is left out as installed, but tensorflow needs it: the index's, said so
    assert [(p["name"], p["version"]) for p in data["packages"]] == [
        ("dep-a", "1.1"), ("dep-c", "1.0"), ("tensorflow", "2.15.1"),
    ]  # fmt: skip
    assert data["captured"]["pins"] == ["dep-a==1.1"]
    assert data["captured"]["left_out"] == sorted(
        ["google-colab", "-e /content/mylib", "tools", "fromgit", "dep-c"]
    )
    notes = data["notes"]
    left = {e["line"]: (e["reason"], e["detail"], e["command"]) for e in data["left_out"]}
    venv_python = str(out / ".venv" / "bin" / "python")
    for line, why in lines.items():
        words = shlex.split(line) if line.startswith("-") else [line]
        pip = [venv_python, "-m", "pip", "install", "--no-deps", "--index-url", full.url]
        assert left[line] == ("direct", why, shlex.join([*pip, *words]))
    assert len(left) == len(lines)
    assert (
        "dep-c is locked at 1.0 from the index all the same (another distribution needs it): "
        "the index's build, not the one installed"
    ) in notes
    assert f"removed {out / 'captured.json'}: it named the interpreter of an earlier capture, " \
        "and a freeze names none" in notes  # fmt: skip
    assert not (out / "captured.json").exists() and data["origin"] is None
    assert data["captured"]["interpreter"] is None

    code, stdout, err = run_cli(*argv)  # printed: the same notes on stderr
    assert code == 0, err
    for line, why in lines.items():
        assert f"  {line}: a direct URL, file or VCS install: {why}\n" in stdout
    assert "Python 3.11: --python\n" in stdout
    assert stdout.endswith("locked 2 of 7; 5 left out: 5 a direct URL, file or VCS install\n")


def test_freeze_lines_capture_still_refuses(tmp_path: Path) -> None:
    freeze = tmp_path / "freeze.txt"
    for line, said, hint in (
        ("numpy>=1.24", "'numpy>=1.24' is not pinned to one version", "envlock lock SPEC -r"),
        ("--index-url https://example.invalid/simple", "--index-url is not a line of a pip "
         "freeze", "give an index with --index-url"),
        ("tensorflow @ file:///wheels/tf", "names no version of tensorflow", "tensorflow==VERSION"),
    ):  # fmt: skip
        freeze.write_text(f"dep-a==1.1\n{line}\n", encoding="utf-8")
        code, _, err = run_cli("capture", "-r", str(freeze), "-o", str(tmp_path / "env"))
        assert code == 2, (line, err)
        assert said in err and hint in err and "Traceback" not in err


def test_lock_r_still_refuses_editable_lines(tmp_path: Path) -> None:
    """read_requirement_file reads -e lines for capture only: lock -r is unchanged."""
    freeze = tmp_path / "reqs.txt"
    freeze.write_text("-e /content/mylib\n", encoding="utf-8")
    code, _, err = run_cli(
        "lock", "tensorflow==2.15.1", "-r", str(freeze), "-o", str(tmp_path / "e")
    )
    assert code == 2
    assert f"-r {freeze}: line 1: -e is not supported here" in err


def test_direct_installs_of_a_venv_each_get_their_note() -> None:
    """The probe's PEP 610 kinds, as captured_from takes them: an archive from a
    local file, a URL, a VCS checkout; and a framework installed from a URL is
    pinned from the index, with a note that it may be another build."""
    from envlock.lock.freeze import installed_line
    from envlock.venv.capture import captured_from

    url = "https://example.invalid/tf/tensorflow-2.15.1-cp311-cp311-manylinux_2_17_x86_64.whl"
    got = captured_from(
        "v",
        [
            installed_line(f"tensorflow @ {url}", "-r f"),
            ("localwheel", "1.0", "url", "file:///wheels/localwheel-1.0-py3-none-any.whl"),
            ("custom", "2.0", "url", "https://example.invalid/custom-2.0-py3-none-any.whl"),
            ("keras", "2.15.0", None),
        ],
    )
    assert (got.version, got.pins) == ("2.15.1", ("keras==2.15.0",))
    assert got.left_out == ("custom", "localwheel")
    assert got.notes == (
        f"tensorflow 2.15.1 ({url}) is a direct install; the lock pins the index's "
        "tensorflow==2.15.1, which may be another build",
        "left out: custom 2.0 (https://example.invalid/custom-2.0-py3-none-any.whl): installed "
        "from a URL: the index's build of that version, if any, may differ",
        "left out: localwheel 1.0 (file:///wheels/localwheel-1.0-py3-none-any.whl): installed "
        "from a local file: no index serves it",
    )
