"""Every fix doctor prints works when pasted, on the environment it inspected (#20).

A real bundle of a tiny 'tensorflow' 2.15.1 from the local index (the stand-in
harness of test_restore, as restore runs whatever harness the bundle holds), a
project venv outside the bundle, then drift. Each fix and alternative doctor
prints (``--json``: ``fix`` unless ``manual``, and ``alternatives``) runs as
printed in a shell, with this machine's index configuration (PIP_INDEX_URL)
standing for the user's; after it, doctor passes on that same venv and the
bundle's default venv (DIR/.venv) was never made.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fixtures.index.fakeindex import FakeIndex
from test_bootstrap_drift import installed
from test_restore import LOCAL_BASE, STUB

import envlock
from envlock.cli import main

ENVLOCK = Path(sys.executable).parent / "envlock"


@pytest.fixture()
def project(
    make_index: Callable[..., FakeIndex],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[Path, Path, dict[str, str]]:
    """(bundle, project venv, the shell's environment)."""
    idx = make_index()
    idx.add_dist(
        "tensorflow",
        "2.15.1",
        tag="py3-none-manylinux_2_17_x86_64",
        requires=("dep-a>=1,<2",),
        init="VERSION = __version__ = '2.15.1'\n",  # what doctor's probe reads
    )
    for v in ("1.0", "1.5"):
        idx.add_dist("dep-a", v)
    # the platform's upgrade (#42): TensorFlow 2.16 (Keras 3) and tf-keras, its way back
    idx.add_dist(
        "tensorflow",
        "2.16.2",
        tag="py3-none-manylinux_2_17_x86_64",
        requires=("dep-a>=1,<2",),
        init="VERSION = __version__ = '2.16.2'\n",
    )
    idx.add_dist("tf-keras", "2.16.0")
    for i in range(5):  # more than a handful of distributions in a venv (#42)
        idx.add_dist(f"extra-{i}", "1.0")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    bundle = tmp_path / "env"
    code = main(
        ["lock", "tensorflow==2.15", "-o", str(bundle), "--index-url", idx.url]
        + ["--base-image", LOCAL_BASE, "--python-from", "image"]
    )
    capsys.readouterr()
    assert code == 0
    (bundle / "envlock_smoke.py").write_text(STUB, encoding="utf-8")
    env = {
        **os.environ,
        # the envlock under test (this checkout's, where the console script is another's)
        "PYTHONPATH": str(Path(envlock.__file__).resolve().parents[1]),
        "PATH": f"{ENVLOCK.parent}{os.pathsep}{os.environ['PATH']}",
        "PIP_INDEX_URL": idx.url,  # the user's index configuration
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
    }
    venv = tmp_path / "project" / "venv"
    shell(f"envlock restore {bundle} --venv {venv} --allow-cpu", env, tmp_path)
    assert installed(venv)["dep-a"] == "1.5"
    return bundle, venv, env


def shell(command: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["bash", "-c", command], env=env, cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
    return proc


def doctor(bundle: Path, venv: Path, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run(
        [str(ENVLOCK), "doctor", "--venv", str(venv), "--lock", str(bundle), "--allow-cpu"]
        + ["--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    doc: dict[str, Any] = json.loads(proc.stdout)
    return proc.returncode, doc


def commands(doc: dict[str, Any]) -> list[str]:
    """Every pasteable command among the failing findings' fixes, in order, once."""
    out: list[str] = []
    for f in doc["findings"]:
        if f["status"] != "FAIL":
            continue
        for fix in ([] if f["manual"] else [f["fix"]]) + f.get("alternatives", []):
            if fix and fix not in out:
                out.append(fix)
    return out


def drift(venv: Path, env: dict[str, str], cwd: Path) -> None:
    """A platform upgrade in miniature: one package gone, one moved."""
    py = venv / "bin" / "python"
    shell(f"{py} -m pip uninstall -y -q tensorflow", env, cwd)
    shell(f"{py} -m pip install -q --no-deps dep-a==1.0", env, cwd)


@pytest.mark.slow  # real venvs, restores and pip installs: about a minute
def test_every_fix_doctor_prints_repairs_the_inspected_venv(
    project: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    bundle, venv, env = project
    code, doc = doctor(bundle, venv, env)
    assert code == 0, [f for f in doc["findings"] if f["status"] == "FAIL"]
    drift(venv, env, tmp_path)
    code, doc = doctor(bundle, venv, env)
    assert code == 1
    fixes = commands(doc)
    # the bundle and the inspected venv in the one command that repairs everything
    assert f"envlock restore {bundle} --venv {venv} --allow-cpu" in fixes
    pip_fixes = [c for c in fixes if "-m pip install" in c]
    assert len(pip_fixes) == 2  # tensorflow and dep-a, each with the lock's hashes
    # each command alone (the pip ones together: each fixes one package)
    for group in [[c for c in fixes if c not in pip_fixes], pip_fixes]:
        for command in group:
            shell(command, env, tmp_path)
        code, after = doctor(bundle, venv, env)
        assert code == 0, (group, [f for f in after["findings"] if f["status"] == "FAIL"])
        assert installed(venv)["dep-a"] == "1.5"
        assert not (bundle / ".venv").exists()  # nothing acted on another environment
        drift(venv, env, tmp_path)


@pytest.mark.slow  # a real restore: about 40 s
def test_a_removed_interpreter_is_one_finding_whose_fix_restores_it(
    project: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    bundle, venv, env = project
    # the platform removed the Python the venv was made from: bin/python dangles
    real = venv.resolve()
    link = real / "bin" / "python"
    target = tmp_path / "gone-python"
    link.unlink()
    link.symlink_to(target)
    code, doc = doctor(bundle, venv, env)
    assert code == 1
    assert [f["check"] for f in doc["findings"]] == ["python"]
    finding = doc["findings"][0]
    assert f"is a link to {target}, which no longer exists" in finding["cause"]
    assert "; pyvenv.cfg says it was made from /" in finding["cause"]  # its home, named
    assert finding["fix"] == f"envlock restore {bundle} --venv {venv} --allow-cpu"
    shell(finding["fix"], env, tmp_path)
    code, doc = doctor(bundle, venv, env)
    assert code == 0, doc


def _remove_base_python(venv: Path, tmp_path: Path) -> tuple[Path, str]:
    """The platform removed the Python the venv was made from: pyvenv.cfg's home
    names a folder that is gone and bin/python dangles into it. The home, and the
    venv's Python minor."""
    cfg = venv / "pyvenv.cfg"
    home = tmp_path / "platform-python" / "bin"
    lines, minor = [], ""
    for line in cfg.read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home":
            line = f"home = {home}"
        if key.strip() in ("version", "version_info"):
            minor = ".".join(value.strip().split(".")[:2])
        lines.append(line)
    cfg.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for name in ("python", "python3", f"python{minor}"):
        link = venv / "bin" / name
        if link.is_symlink() or link.exists():
            link.unlink()
            link.symlink_to(home / f"python{minor}")
    return home, minor


@pytest.mark.slow  # a real venv remade and pip installs: about 30 s
def test_a_removed_interpreter_without_a_lock_is_made_again_by_the_printed_command(
    project: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    """#42: no bundle to restore from: the finding names the gone home and its fix,
    run as printed, makes the venv again with that Python and reinstalls what was
    installed at the top (pip brings what it requires)."""
    _, venv, env = project
    home, minor = _remove_base_python(venv, tmp_path)
    proc = subprocess.run(
        [str(ENVLOCK), "doctor", "--venv", str(venv), "--allow-cpu", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    (finding,) = json.loads(proc.stdout)["findings"]
    assert f"pyvenv.cfg says it was made from {home} (Python {minor}." in finding["cause"]
    assert "gone too" in finding["cause"]
    assert not finding["manual"]
    # a Python of that minor as restore finds one (PATH, pyenv, uv), by its path
    base, rest = finding["fix"].split(" ", 1)
    assert rest == (  # the folder the venv's path links to: venv --clear refuses a link
        f"-m venv --clear {venv.resolve()} && {venv}/bin/python -m pip install tensorflow==2.15.1"
    )
    assert Path(base).is_absolute() and Path(base).exists()
    shell(finding["fix"], env, tmp_path)
    assert installed(venv) == {"tensorflow": "2.15.1", "dep-a": "1.5"} | {
        k: v for k, v in installed(venv).items() if k in ("pip", "setuptools", "wheel")
    }
    proc = subprocess.run(
        [str(ENVLOCK), "doctor", "--venv", str(venv), "--allow-cpu", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout


def printed_fixes(text: str) -> list[dict[str, Any]]:
    """The fix list of doctor's text output, as printed: one entry per heading, its
    ways (one unless 'either'), each way's label and its steps, a run: step with its
    continuation lines (ending in \\) as the lines themselves."""
    lines = text.split("\nto fix (", 1)[1].splitlines()
    lines = lines[next(i for i, line in enumerate(lines) if line.startswith("  ")) :]
    entries: list[dict[str, Any]] = []
    command: list[str] | None = None
    for line in lines:
        if command is not None:  # the lines of a broken command, as printed
            command.append(line)
            if not line.endswith(" \\"):
                command = None
            continue
        stripped = line.strip()
        numbered = re.match(r"(?:or )?([0-9]+)\) (.*)", stripped)
        if not line.startswith("    "):
            entries.append({"heading": stripped, "ways": [{"label": "", "steps": []}]})
        elif numbered:
            ways = entries[-1]["ways"]
            if numbered.group(1) != "1":
                ways.append({"label": "", "steps": []})
            ways[-1]["label"] = numbered.group(2)
        elif stripped.startswith(("run: ", "do: ")):
            kind, rest = stripped.split(": ", 1)
            step = [rest]
            entries[-1]["ways"][-1]["steps"].append((kind, step))
            if kind == "run" and rest.endswith(" \\"):
                command = step
    return [
        {
            "heading": e["heading"],
            "ways": [
                {"label": w["label"], "steps": [(k, "\n".join(t)) for k, t in w["steps"]]}
                for w in e["ways"]
            ],
        }
        for e in entries
    ]


def upgrade(venv: Path, env: dict[str, str], cwd: Path) -> None:
    """The platform upgrades TensorFlow 2.15.1 -> 2.16.2 (Keras 3) and moves dep-a."""
    py = venv / "bin" / "python"
    shell(f"{py} -m pip install -q --no-deps tensorflow==2.16.2 dep-a==1.0", env, cwd)
    shell(f"{py} -m pip uninstall -y -q tf-keras", env, cwd)


@pytest.mark.slow  # real venvs, two restores and pip installs: about two minutes
def test_every_way_of_every_fix_runs_as_printed_at_60_columns(
    project: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    """#42: doctor's text at COLUMNS=60, after a TensorFlow 2.15 -> 2.16 upgrade: the
    ways out are alternatives under one heading, and every run: step of every way,
    pasted as printed (continuation lines and all) into a shell, runs; each way back
    to the lock makes doctor pass, the way that stays on 2.16 installs tf-keras."""
    bundle, venv, env = project
    env = {**env, "COLUMNS": "60"}
    upgrade(venv, env, tmp_path)
    argv = [str(ENVLOCK), "doctor", "--venv", str(venv), "--lock", str(bundle), "--allow-cpu"]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    entries = printed_fixes(proc.stdout)
    assert [(e["heading"], len(e["ways"])) for e in entries] == [
        ("package dep-a, package tensorflow: either", 2),
        ("tensorflow version, keras: either", 2),
        # this machine has no GPU (--allow-cpu): steps by hand, said where
        ("tensorflow build:", 1),
        ("driver:", 1),
        ("libraries:", 1),
    ], proc.stdout
    for entry in entries[2:]:
        assert [kind for kind, _ in entry["ways"][0]["steps"]] == ["do"]
    entries = entries[:2]
    assert [w["label"] for w in entries[1]["ways"]][0] == "back to tensorflow 2.15.1, the lock's:"
    assert any("\\\n" in t for e in entries for w in e["ways"] for _, t in w["steps"])
    ran = 0
    for entry in entries:
        for way in entry["ways"]:
            assert way["steps"] and all(kind == "run" for kind, _ in way["steps"]), way
            for _, command in way["steps"]:
                shell(command, env, tmp_path)
                ran += 1
            after = subprocess.run([*argv, "--json"], env=env, capture_output=True, text=True)
            doc = json.loads(after.stdout)
            if way["label"].startswith("stay on tensorflow 2.16.2"):
                assert installed(venv)["tf-keras"] == "2.16.0"
                assert installed(venv)["tensorflow"] == "2.16.2"
            else:
                failed = [f for f in doc["findings"] if f["status"] == "FAIL"]
                assert after.returncode == 0, (way, failed)
                assert installed(venv)["tensorflow"] == "2.15.1"
            assert not (bundle / ".venv").exists()  # nothing acted on another environment
            upgrade(venv, env, tmp_path)
    assert ran == 6  # restore; two pip lines; restore; tf-keras and the export


@pytest.mark.slow  # a real venv remade and pip installs: about 40 s
def test_a_removed_interpreter_with_many_distributions_is_made_again_through_a_file(
    project: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    """#42: more than a handful of distributions at the top: the fix names none of
    them; the new Python writes them to a file beside the venv, the venv is made
    again and pip installs the file. Each step run as printed (COLUMNS=60)."""
    _, venv, env = project
    py = venv / "bin" / "python"
    extras = " ".join(f"extra-{i}==1.0" for i in range(5))
    shell(f"{py} -m pip install -q --no-deps {extras}", env, tmp_path)
    before = installed(venv, skip=("pip", "setuptools", "wheel"))
    assert len(before) == 7
    _remove_base_python(venv, tmp_path)
    env = {**env, "COLUMNS": "60"}
    argv = [str(ENVLOCK), "doctor", "--venv", str(venv), "--allow-cpu"]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    (entry,) = printed_fixes(proc.stdout)
    (way,) = entry["ways"]
    steps = way["steps"]
    assert [kind for kind, _ in steps] == ["run"] * 3, steps
    assert not [t for _, t in steps if "extra-" in t]  # the file names them, no argument
    listed = Path(f"{venv.resolve()}.distributions.txt")
    assert shlex.split(steps[2][1].replace("\\\n", ""))[-4:] == [
        "pip",
        "install",
        "-r",
        str(listed),
    ]
    for _, command in steps:
        shell(command, env, tmp_path)
    assert listed.read_text(encoding="utf-8").split() == sorted(
        f"{name}=={version}" for name, version in before.items()
    )
    assert installed(venv, skip=("pip", "setuptools", "wheel")) == before
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout
