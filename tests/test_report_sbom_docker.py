"""``envlock report sbom`` against images that lie about themselves (issue #38, break 8).

Small images are built from the local base (tests/docker/setup.sh), each with one
defect: a dpkg status file over the 32 MiB cap, one that is a symbolic link or a
FIFO, none at all; an image built from another lock than ``--lock DIR``'s, or
from no envlock bundle. The command runs in a subprocess with a time limit, so a
hang is a failure, not a stuck suite; after each run no container of the image
is left.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_support import engine_client

from envlock.report import sbom as sbommod

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_LOCK = Path(__file__).parent / "fixtures" / "old-bundles" / "v1-lock"
LOCK_TEXT = (FIXTURE_LOCK / "pylock.toml").read_text()
# the same lock but for dep-a 1.1 (another wheel, another hash)
OTHER_LOCK_TEXT = (
    LOCK_TEXT.replace('"dep-a"\nversion = "1.0"', '"dep-a"\nversion = "1.1"')
    .replace("dep_a-1.0-py3", "dep_a-1.1-py3")
    .replace("ea4dbef8e9bd", "0000000000bd")
)
STATUS = sbommod.DPKG_STATUS
RUN_LIMIT_S = 120


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    yield from engine_client(300)


@pytest.fixture(scope="module")
def images(client: Any, base_image: str) -> Iterator[dict[str, str]]:
    """name -> image tag, each built once for the module and removed afterwards."""
    copy_lock = "COPY pylock.toml /opt/envlock/pylock.toml\n"
    recipes = {
        "good": copy_lock,
        "other-lock": "COPY other.toml /opt/envlock/pylock.toml\n",
        # a label of its own: FROM alone would be the base image itself (one id), whose
        # descendants are every other Docker test's builds and runs
        "no-lock": "LABEL io.envlock.test=sbom-no-lock\n",
        # 33 MiB of text: over the cap, and more than any pipe holds
        "huge-status": copy_lock + f"RUN yes 'Package: x' | head -c 34603008 > {STATUS}\n",
        "link-status": copy_lock + f"RUN mv {STATUS} {STATUS}.real && ln -s status.real {STATUS}\n",
        "fifo-status": copy_lock + f"RUN rm {STATUS} && mkfifo {STATUS}\n",
        "no-status": copy_lock + f"RUN rm {STATUS}\n",
    }
    tag = uuid.uuid4().hex[:10]
    made: dict[str, str] = {}
    try:
        for name, steps in recipes.items():
            ref = f"envlock-test/sbom-{name}:{tag}"
            _build(client, ref, f"FROM {base_image}\n{steps}")
            made[name] = ref
        yield made
    finally:
        for ref in made.values():
            client.images.remove(ref, force=True, noprune=False)


def _build(client: Any, ref: str, dockerfile: str) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text in (
            ("Dockerfile", dockerfile),
            ("pylock.toml", LOCK_TEXT),
            ("other.toml", OTHER_LOCK_TEXT),
        ):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    # no cache: the classic builder's cache lookup reads every child image of the
    # base, and another module's teardown removing one of them mid-lookup failed the
    # build ("failed to get digest ...: no such file or directory")
    client.images.build(
        fileobj=buf, custom_context=True, tag=ref, rm=True, forcerm=True, network_mode="none",
        nocache=True,
    )  # fmt: skip


def _sbom(client: Any, image: str, lock: Path) -> subprocess.CompletedProcess[str]:
    """``envlock report sbom IMAGE --lock LOCK --json`` in a subprocess, at most
    RUN_LIMIT_S seconds (a hang fails the test); no container of IMAGE is left."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "envlock", "report", "sbom", image, "--lock", str(lock)]
            + ["--json"],
            capture_output=True,
            text=True,
            timeout=RUN_LIMIT_S,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"report sbom {image} did not end in {RUN_LIMIT_S} s")
    finally:
        # those made from IMAGE itself (the ancestor filter also names its descendants'),
        # as report sbom creates them: by the name it was given
        made = client.containers.list(all=True, filters={"ancestor": image})
        left = [c for c in made if c.attrs["Config"]["Image"] == image]
        for c in left:
            with contextlib.suppress(Exception):  # a removal the run left in progress
                c.remove(force=True)
    assert not left, f"containers of {image} left behind: {[c.id[:12] for c in left]}"
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _lock(tmp_path: Path, text: str = LOCK_TEXT) -> Path:
    folder = tmp_path / "lock"
    folder.mkdir(parents=True)
    (folder / "pylock.toml").write_text(text)
    return folder


def test_a_dpkg_status_over_the_cap_is_exit_3_without_a_hang(
    client: Any, images: dict[str, str], tmp_path: Path
) -> None:
    """Break 8a: the archive stream was left open when the cap was hit, and the
    container's removal waited on it for ever."""
    lock = _lock(tmp_path)
    done = _sbom(client, images["huge-status"], lock)
    assert done.returncode == 3, done.stderr
    assert f"{STATUS} is 34603008 bytes, more than the 33554432" in done.stderr
    assert "hint:" in done.stderr
    assert not (lock / sbommod.FILE).exists()


def test_the_python_components_are_the_images_own_lock_and_a_different_one_fails(
    client: Any, images: dict[str, str], tmp_path: Path
) -> None:
    """Break 8b: the SBOM listed --lock DIR's packages for any image."""
    lock = _lock(tmp_path)
    done = _sbom(client, images["good"], lock)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["python_components"] == 2 and summary["os_components"] > 50
    doc = json.loads((lock / sbommod.FILE).read_text())
    assert "pkg:pypi/dep-a@1.0" in [c["purl"] for c in doc["components"]]

    other = _lock(tmp_path / "other", OTHER_LOCK_TEXT)
    done = _sbom(client, images["good"], other)
    assert done.returncode == 1, done.stderr
    assert "differs from" in done.stderr and "dep-a: 1.0 in the image, 1.1 in" in done.stderr
    assert f"hint: {images['good']} was built from a lock of tensorflow 2.14.1" in done.stderr
    assert not (other / sbommod.FILE).exists()

    done = _sbom(client, images["other-lock"], lock)
    assert done.returncode == 1, done.stderr
    assert "dep-a: 1.1 in the image, 1.0 in" in done.stderr

    fresh = _lock(tmp_path / "fresh")
    done = _sbom(client, images["no-lock"], fresh)
    assert done.returncode == 1, done.stderr
    assert f"{images['no-lock']} has no /opt/envlock/pylock.toml" in done.stderr
    assert "hint:" in done.stderr
    assert not (fresh / sbommod.FILE).exists()


@pytest.mark.parametrize(("kind", "said"), [("link", "a symbolic link"), ("fifo", "a FIFO")])
def test_a_dpkg_status_that_is_a_link_or_a_fifo_is_exit_3_not_an_empty_os(
    client: Any, images: dict[str, str], tmp_path: Path, kind: str, said: str
) -> None:
    """Break 8c: a link or a FIFO read as "no dpkg database": 0 OS packages, no word."""
    lock = _lock(tmp_path)
    done = _sbom(client, images[f"{kind}-status"], lock)
    assert done.returncode == 3, done.stderr
    assert f"{STATUS} is {said}" in done.stderr and "hint:" in done.stderr
    assert not (lock / sbommod.FILE).exists()


def test_an_image_without_a_dpkg_database_has_no_os_packages_and_says_so(
    client: Any, images: dict[str, str], tmp_path: Path
) -> None:
    lock = _lock(tmp_path)
    done = _sbom(client, images["no-status"], lock)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["os_components"] == 0 and summary["os_database"] == "absent"
    assert f"has no {STATUS}" in done.stderr
