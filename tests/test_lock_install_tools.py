"""pipenv, tox and pipx install envlock's lock, and each refuses a changed hash.

Each tool is installed from the index (pip's configuration) into a venv of its
own. The lock is a real ``envlock lock`` of a tiny 'tensorflow' 2.15.1 from the
local index of tests/fixtures/index (a fake wheel with one module and, as the
real TensorFlow wheel has, a console script, ``saved_model_cli``), with one
dependency, dep-a 1.5 (1.0 is on the index too). Each tool reads the lock the
way its users would, and is pointed at the local index as a user points it at
a private one:

- pipenv: ``pipenv sync`` in a project with a Pipfile and envlock's pylock.toml
  (no Pipfile.lock: pipenv then installs from pylock.toml, every line with its
  ``--hash``). pipenv reads neither the wheels' ``url`` nor a Pipfile's
  ``[[source]]`` in that case: it installs from its default index (the public
  one), so ``--pypi-mirror URL`` points it at this one. Not
  ``pipenv install -r requirements.txt``: that imports the pins into the
  Pipfile, drops the ``--hash`` options and locks again with the hashes the
  index lists, so a changed hash in requirements.txt goes unnoticed (seen with
  pipenv 2026.10.3).
- tox: ``pylock = pylock.toml`` in tox.ini (tox's own pylock reader, which hands
  pip ``name==version --hash=...`` lines and ``--no-deps``), and the older form,
  ``deps = -r requirements.txt``; the index is ``PIP_INDEX_URL``, which tox
  passes to pip.
- pipx: ``pipx install --lock pylock.toml tensorflow==2.15.1`` (pip reads the
  pylock.toml itself, the wheels from their ``url``).

The installs run with pip's configuration files off (``PIP_CONFIG_FILE`` =
os.devnull), so the local index is the only one there is. The changed hash is
dep-a's; each tool must then exit non-zero with pip's expected/got lines, and
nothing of the lock, dep-a least of all, may be in the environment.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fixtures.index.fakeindex import FakeIndex, FakeWheel, make_dist
from venv_support import tool_venv

from envlock.cli import main
from envlock.lock import read_lock

# installs pipenv, tox and pipx from the index (about 20 s here), then a dozen
# tool runs of 2-6 s each: about a minute in all
pytestmark = [pytest.mark.network, pytest.mark.slow]

HERE_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
LOCKED = {"tensorflow": "2.15.1", "dep-a": "1.5"}  # what the lock must hold
TF_INIT = "VERSION = '2.15.1'\n\ndef main():\n    print('saved_model_cli', VERSION)\n"
PROBE = (
    "import json, importlib.metadata as m, tensorflow, dep_a; "
    "print(json.dumps({'dists': {d.metadata['Name']: d.version for d in m.distributions()}, "
    "'modules': [tensorflow.VERSION, dep_a.VERSION]}))"
)


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)  # type: ignore[call-overload, no-any-return]


def with_console_script(wheel: FakeWheel, script: str, target: str) -> FakeWheel:
    """``wheel`` with ``[console_scripts] script = target`` (and its RECORD line)."""
    src = zipfile.ZipFile(io.BytesIO(wheel.data))
    info = next(n for n in src.namelist() if n.endswith(".dist-info/RECORD")).rsplit("/", 1)[0]
    files = {n: src.read(n) for n in src.namelist() if n != f"{info}/RECORD"}
    files[f"{info}/entry_points.txt"] = f"[console_scripts]\n{script} = {target}\n".encode()
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as out:
        for path, data in files.items():
            out.writestr(zipfile.ZipInfo(path, date_time=(2024, 1, 1, 0, 0, 0)), data)
    return FakeWheel(wheel.filename, buf.getvalue())


@pytest.fixture(scope="module")
def index(make_module_index: Callable[..., FakeIndex]) -> FakeIndex:
    idx = make_module_index()
    tf = make_dist(
        "tensorflow",
        "2.15.1",
        tag="py3-none-manylinux_2_17_x86_64",
        requires=("dep-a>=1,<2",),
        init=TF_INIT,
    )
    idx.add(with_console_script(tf, "saved_model_cli", "tensorflow:main"))
    for v in ("1.0", "1.5"):
        idx.add_dist("dep-a", v)
    return idx


@pytest.fixture(scope="module")
def bundle(index: FakeIndex, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if HERE_PYTHON not in ("3.9", "3.10", "3.11"):  # the Pythons TensorFlow 2.15 supports
        pytest.skip(f"TensorFlow 2.15 has no wheel for this interpreter's Python {HERE_PYTHON}")
    out = tmp_path_factory.mktemp("bundle") / "env"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UV_CACHE_DIR", str(out.parent / "uv-cache"))
        argv = ["lock", "tensorflow==2.15", "--index-url", index.url, "--python", HERE_PYTHON]
        assert main([*argv, "-o", str(out), "--json"]) == 0
    assert {p.name: p.version for p in read_lock(out).packages} == LOCKED
    return out


def tool(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """``name`` installed from the index (pip's configuration) into a venv of its own
    (by uv: the tools' own installs are not what these tests check)."""
    return tool_venv(tmp_path_factory.mktemp(name) / "venv", name) / name


@pytest.fixture(scope="module")
def pipenv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tool(tmp_path_factory, "pipenv")


@pytest.fixture(scope="module")
def tox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tool(tmp_path_factory, "tox")


@pytest.fixture(scope="module")
def pipx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """pipx and the environment it runs in; its shared pip is made (from the index,
    by pip's configuration) before the lock installs, which run without it."""
    exe = tool(tmp_path_factory, "pipx")
    home = exe.parent.parent.parent / "pipx-home"
    env = {**os.environ, "PIPX_HOME": str(home / "home"), "PIPX_BIN_DIR": str(home / "bin")}
    env["PIPX_MAN_DIR"] = str(home / "man")
    shared = run([str(exe), "upgrade-shared"], env=env)
    assert shared.returncode == 0, shared.stdout[-3000:] + shared.stderr[-3000:]
    yield exe, {**env, "PIPX_DISABLE_SHARED_LIBS_AUTO_UPGRADE": "1"}


def only_local(env: dict[str, str], cache: Path) -> dict[str, str]:
    """``env`` with pip's configuration off: no index but the one a test names."""
    kept = {
        k: v
        for k, v in env.items()
        if k
        not in (
            "PIP_INDEX_URL",
            "PIP_EXTRA_INDEX_URL",
            "PIP_FIND_LINKS",
            "PIP_NO_INDEX",
            "PIP_CONSTRAINT",
            "PIP_REQUIRE_VIRTUALENV",
            "VIRTUAL_ENV",
        )
    }
    return {**kept, "PIP_CONFIG_FILE": os.devnull, "PIP_CACHE_DIR": str(cache)}


def tampered(text: str, bundle: Path) -> tuple[str, str, str]:
    """``text`` with dep-a's sha256 changed in its last digit; (text, good, bad)."""
    good = next(p for p in read_lock(bundle).packages if p.name == "dep-a").wheels[0].sha256
    assert text.count(good) == 1, "dep-a's hash is written once"
    bad = good[:-1] + ("0" if good[-1] != "0" else "1")
    return text.replace(good, bad), good, bad


def probe(python: Path) -> dict[str, object]:
    """What ``python``'s environment holds: every distribution and the modules' VERSION."""
    out = run([str(python), "-c", PROBE])
    assert out.returncode == 0, out.stderr[-3000:]
    doc: dict[str, object] = json.loads(out.stdout)
    return doc


def assert_exactly_locked(python: Path) -> None:
    doc = probe(python)
    assert doc["modules"] == ["2.15.1", "1.5"]
    dists = doc["dists"]
    assert isinstance(dists, dict)
    # the venv's own seed packages aside, exactly the locked versions
    assert {k: v for k, v in dists.items() if k not in ("pip", "setuptools", "wheel")} == LOCKED


def nothing_locked_under(root: Path) -> None:
    """No file of a locked package anywhere below ``root`` (a venv, or where one was)."""
    found = [
        p for pattern in ("dep_a*", "tensorflow*") for p in root.glob(f"**/site-packages/{pattern}")
    ]
    assert found == []


def refused(said: str, good: str, bad: str) -> None:
    """pip's hash refusal for dep-a, as the tool passed it on (perhaps wrapped)."""
    flat = re.sub(r"\s+", " ", said)
    assert "DO NOT MATCH THE HASHES" in flat, said[-3000:]
    assert re.search(r"dep-a==1\.5 from \S+dep_a-1\.5-py3-none-any\.whl", flat), said[-3000:]
    assert f"Expected sha256 {bad} Got {good}" in flat, said[-3000:]


# ---------------------------------------------------------------------- pipenv


def pipenv_sync(pipenv: Path, project: Path, index: FakeIndex) -> subprocess.CompletedProcess[str]:
    env = only_local(dict(os.environ), project.parent / "pip-cache")
    env.update(
        PIPENV_VENV_IN_PROJECT="1",
        PIPENV_YES="1",
        PIPENV_NOSPIN="1",
        PIPENV_IGNORE_VIRTUALENVS="1",
        PIPENV_CACHE_DIR=str(project.parent / "pipenv-cache"),
    )
    argv = [str(pipenv), "sync", "--pypi-mirror", index.url, "--python", sys.executable]
    return run(argv, cwd=project, env=env)


def pipenv_project(root: Path, lock_text: str) -> Path:
    root.mkdir()
    (root / "Pipfile").write_text(f'[packages]\n\n[requires]\npython_version = "{HERE_PYTHON}"\n')
    (root / "pylock.toml").write_text(lock_text)
    return root


def test_pipenv_syncs_the_pylock(
    pipenv: Path, bundle: Path, index: FakeIndex, tmp_path: Path
) -> None:
    project = pipenv_project(tmp_path / "p", (bundle / "pylock.toml").read_text())
    out = pipenv_sync(pipenv, project, index)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "Installing dependencies from pylock.toml" in out.stdout + out.stderr
    assert not (project / "Pipfile.lock").exists()
    assert_exactly_locked(project / ".venv" / "bin" / "python")


def test_pipenv_refuses_a_changed_hash(
    pipenv: Path, bundle: Path, index: FakeIndex, tmp_path: Path
) -> None:
    text, good, bad = tampered((bundle / "pylock.toml").read_text(), bundle)
    project = pipenv_project(tmp_path / "p", text)
    out = pipenv_sync(pipenv, project, index)
    assert out.returncode != 0
    refused(out.stdout + out.stderr, good, bad)
    nothing_locked_under(project)


# ------------------------------------------------------------------------- tox

TOX_INI = """\
[tox]
env_list = locked
[testenv:locked]
package = skip
{install}
commands = python -c "import tensorflow, dep_a; print(tensorflow.VERSION, dep_a.VERSION)"
"""
TOX_FORMS = {
    "pylock": ("pylock.toml", "pylock = pylock.toml"),
    "requirements": ("requirements.txt", "deps = -r requirements.txt"),
}


def tox_run(
    tox: Path, bundle: Path, form: str, root: Path, lock_text: str | None, index: FakeIndex
) -> subprocess.CompletedProcess[str]:
    name, install = TOX_FORMS[form]
    root.mkdir()
    (root / "tox.ini").write_text(TOX_INI.format(install=install))
    (root / name).write_text(lock_text if lock_text is not None else (bundle / name).read_text())
    env = only_local(dict(os.environ), root / "pip-cache")
    env["PIP_INDEX_URL"] = index.url
    return run([str(tox), "run", "-e", "locked"], cwd=root, env=env)


@pytest.mark.parametrize("form", sorted(TOX_FORMS))
def test_tox_installs_the_lock(
    tox: Path, bundle: Path, index: FakeIndex, tmp_path: Path, form: str
) -> None:
    out = tox_run(tox, bundle, form, tmp_path / "p", None, index)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "\n2.15.1 1.5\n" in out.stdout
    if form == "pylock":  # tox's reader: every line hashed, --no-deps
        assert "install_pylock> python -I -m pip install --no-deps -r" in out.stdout
    assert_exactly_locked(tmp_path / "p" / ".tox" / "locked" / "bin" / "python")


@pytest.mark.parametrize("form", sorted(TOX_FORMS))
def test_tox_refuses_a_changed_hash(
    tox: Path, bundle: Path, index: FakeIndex, tmp_path: Path, form: str
) -> None:
    name = TOX_FORMS[form][0]
    text, good, bad = tampered((bundle / name).read_text(), bundle)
    out = tox_run(tox, bundle, form, tmp_path / "p", text, index)
    assert out.returncode != 0
    refused(out.stdout + out.stderr, good, bad)
    assert "2.15.1 1.5" not in out.stdout  # the commands never ran
    nothing_locked_under(tmp_path / "p" / ".tox")


# ------------------------------------------------------------------------ pipx


def pipx_install(pipx: tuple[Path, dict[str, str]], lock: Path) -> subprocess.CompletedProcess[str]:
    exe, env = pipx
    env = only_local(env, lock.parent / "pip-cache")
    return run([str(exe), "install", "--lock", str(lock), "tensorflow==2.15.1"], env=env)


def test_pipx_installs_the_pylock(
    pipx: tuple[Path, dict[str, str]], bundle: Path, index: FakeIndex, tmp_path: Path
) -> None:
    exe, env = pipx
    lock = tmp_path / "pylock.toml"
    lock.write_text((bundle / "pylock.toml").read_text())
    before = dict(index.client_hits)
    out = pipx_install(pipx, lock)
    try:
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        # pip took the wheels from the lock's urls, asking the index for no page
        by_pip = {
            p
            for (client, p), n in index.client_hits.items()
            if n > before.get((client, p), 0) and client == "pip"
        }
        assert by_pip == {
            f"/files/{w.filename}" for p in read_lock(bundle).packages for w in p.wheels
        }
        venv = Path(env["PIPX_HOME"]) / "venvs" / "tensorflow"
        assert_exactly_locked(venv / "bin" / "python")
        app = run([str(Path(env["PIPX_BIN_DIR"]) / "saved_model_cli")])
        assert app.stdout == "saved_model_cli 2.15.1\n"
    finally:
        run([str(exe), "uninstall", "tensorflow"], env=env)


def test_pipx_refuses_a_changed_hash(
    pipx: tuple[Path, dict[str, str]], bundle: Path, tmp_path: Path
) -> None:
    exe, env = pipx
    text, good, bad = tampered((bundle / "pylock.toml").read_text(), bundle)
    lock = tmp_path / "pylock.toml"
    lock.write_text(text)
    out = pipx_install(pipx, lock)
    said = out.stdout + out.stderr
    assert out.returncode != 0, said[-3000:]
    assert "Error installing packages from" in said, said[-3000:]
    # pipx keeps pip's output in a log file it names
    logs = sorted((Path(env["PIPX_HOME"]) / "logs").glob("*pip_errors*"))
    assert logs, said[-3000:]
    refused(logs[-1].read_text(), good, bad)
    nothing_locked_under(Path(env["PIPX_HOME"]))
    assert not (Path(env["PIPX_BIN_DIR"]) / "saved_model_cli").exists()
