"""The README's "When no registry can be reached" commands, run as written (#42).

The lock line runs in a shell with the user's index configuration (PIP_INDEX_URL,
here a fake index with a tiny 'tensorflow' 2.15.1): the bundle's Dockerfile is
FROM the README's image and takes its Python from it. With a Docker Engine, the
same lines on the local test image (the README's mirror is not here) build it,
the RUN steps reaching the fake index on the host's network, given to the build
with --build-arg PIP_INDEX_URL as the section says.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.index.fakeindex import FakeIndex

import envlock

ROOT = Path(__file__).resolve().parent.parent
ENVLOCK = Path(sys.executable).parent / "envlock"


def readme_lines() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### When no registry can be reached\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1).strip().splitlines()


def test_the_section_names_the_four_options() -> None:
    lock, build = readme_lines()
    assert lock.startswith("envlock lock ") and build.startswith("envlock build ")
    words = shlex.split(lock) + shlex.split(build)
    for option in ("--python", "--base-image", "--python-from", "--network"):
        assert option in words
    assert words[words.index("--python-from") + 1] == "image"
    assert shlex.split(build)[-2:] == ["--network", "host"]


def _shell(command: str, env: dict[str, str], cwd: Path) -> None:
    done = subprocess.run(
        ["bash", "-c", command], env=env, cwd=cwd, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"


def _env(idx: FakeIndex, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(Path(envlock.__file__).resolve().parents[1]),
        "PATH": f"{ENVLOCK.parent}{os.pathsep}{os.environ['PATH']}",
        "PIP_INDEX_URL": idx.url,  # the user's index configuration
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
    }


def _index(make_index: object) -> FakeIndex:
    idx: FakeIndex = make_index()  # type: ignore[operator]
    idx.add_dist(
        "tensorflow",
        "2.15.1",
        tag="py3-none-manylinux_2_17_x86_64",
        init="VERSION = __version__ = '2.15.1'\n",
    )
    return idx


def test_the_lock_line_runs_as_written(make_index: object, tmp_path: Path) -> None:
    lock, _ = readme_lines()
    _shell(lock, _env(_index(make_index), tmp_path), tmp_path)
    image = shlex.split(lock)[shlex.split(lock).index("--base-image") + 1]
    dockerfile = (tmp_path / "env" / "Dockerfile").read_text(encoding="utf-8")
    assert f"\nARG BASE_IMAGE={image}\n" in dockerfile
    # the image's own Python makes the venv: no apt, no uv download in the build
    assert "\nRUN python3.11 -m venv /opt/venv\n" in dockerfile
    assert "apt-get" not in dockerfile and "uv python install" not in dockerfile
    pylock = (tmp_path / "env" / "pylock.toml").read_text(encoding="utf-8")
    assert 'requires-python = "==3.11.*"' in pylock


@pytest.mark.docker
@pytest.mark.slow  # a lock and an image build
def test_the_lines_build_on_a_local_image(
    make_index: object, tmp_path: Path, base_image: str
) -> None:
    lock, build = readme_lines()
    image = shlex.split(lock)[shlex.split(lock).index("--base-image") + 1]
    idx = _index(make_index)
    env = _env(idx, tmp_path)
    _shell(lock.replace(image, base_image), env, tmp_path)
    # the section's text: an index other than the default one is given to the build
    # with --build-arg PIP_INDEX_URL (pip in the build reads no host configuration)
    assert "`--build-arg PIP_INDEX_URL=URL`" in (ROOT / "README.md").read_text(encoding="utf-8")
    try:
        _shell(f"{build} --build-arg PIP_INDEX_URL={shlex.quote(idx.url)}", env, tmp_path)
    finally:
        subprocess.run(["docker", "rmi", "-f", "tf215"], capture_output=True, check=False)
