"""envlock smoke IMAGE through the Docker Engine: the ways a smoke run goes
wrong (no NVIDIA toolkit, no Python, a harness that crashes or dies halfway or
hangs, no daemon), on small images made here.

The real TF 2.15 image is smoke-tested, rebuilt and signed in
tests/test_render_docker.py, which builds it once for both modules' tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_support import checks, engine_client, remove_image, smoke_json

from envlock.cli import main
from envlock.image.build import build_image

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    yield from engine_client(300)


# ---------------------------------------------------------------- failure paths


def _small_image(client: Any, folder: Path, tag: str, files: dict[str, str]) -> str:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return build_image(folder, tag=tag, network="none", progress="quiet").image_id


FAKE_TF = """
import ctypes
__version__ = "2.15.1"
class sysconfig:
    @staticmethod
    def get_build_info():
        return {"cuda_version": "12.2", "cudnn_version": "8", "is_cuda_build": True}
class _Experimental:
    @staticmethod
    def set_memory_growth(device, enabled):
        pass
class config:
    experimental = _Experimental
    @staticmethod
    def list_physical_devices(kind):
        if MODE == "raise":
            raise RuntimeError("CUDA driver initialization failed, you might not have a CUDA gpu.")
        ctypes.string_at(0)  # segfault, as a broken driver library can
"""


CHATTY_PAUSE = 4.0
CHATTY_TF = f"""
import sys, time
sys.stderr.write("fake-tf: importing, this takes a while\\n")
sys.stderr.flush()
time.sleep({CHATTY_PAUSE})
sys.stderr.write("fake-tf: imported\\n")
sys.stderr.flush()
"""


@pytest.fixture(scope="module")
def broken_images(
    client: Any, tmp_path_factory: pytest.TempPathFactory, base_image: str
) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("broken")
    site = "/usr/lib/python3/dist-packages/tensorflow/__init__.py"
    images = {
        "no-python": (
            f"FROM {base_image}\n"
            "RUN rm -f /usr/bin/python3* /usr/local/bin/python3* /usr/bin/python\n",
            {},
        ),
        "crash": (
            f"FROM {base_image}\nCOPY tf.py {site}\n",
            {"tf.py": "MODE = 'raise'\n" + FAKE_TF},
        ),
        "segv": (
            f"FROM {base_image}\nCOPY tf.py {site}\n",
            {"tf.py": "MODE = 'segv'\n" + FAKE_TF},
        ),
        "no-shell": ("FROM scratch\nLABEL io.envlock.framework=tensorflow\n", {}),
        "hang": (
            f"FROM {base_image}\nCOPY tf.py {site}\n",
            {"tf.py": "import time\ntime.sleep(3600)\n"},
        ),
        # one stderr line, a pause, then the crash of "crash": the line must be
        # on envlock's stderr while the container still runs
        "chatty": (
            f"FROM {base_image}\nCOPY tf.py {site}\n",
            {"tf.py": CHATTY_TF + "MODE = 'raise'\n" + FAKE_TF},
        ),
    }
    tags = {}
    for name, (dockerfile, files) in images.items():
        tag = f"envlock-test/h5-{name}:1"
        _small_image(client, root / name, tag, {"Dockerfile": dockerfile, **files})
        tags[name] = tag
    yield tags
    for tag in tags.values():
        remove_image(client, tag)


def test_image_without_python(
    broken_images: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, result, _ = smoke_json(capsys, broken_images["no-python"], "--gpus", "none")
    assert code == 1
    assert result["status"] == "FAILED"
    assert checks(result)["python"][0] == "FAIL"
    assert checks(result)["python"][1].startswith("no Python interpreter in the image")


def test_image_without_a_shell(
    broken_images: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # GPUs asked for: the engine refuses them first, then the plain start has no /bin/sh
    code, result, _ = smoke_json(capsys, broken_images["no-shell"])
    assert code == 1
    assert result["framework"] == "tensorflow"  # from the image label
    assert [c["name"] for c in result["checks"]] == ["gpu_request", "shell"]
    assert checks(result)["shell"][1].startswith("the image has no /bin/sh to start the harness")


def test_harness_crashing_halfway_is_reported_not_dumped(
    broken_images: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, result, err = smoke_json(
        capsys, broken_images["crash"], "--framework", "tensorflow", "--gpus", "none"
    )
    got = checks(result)
    assert code == 1
    assert result["status"] == "FAILED"
    assert got["framework_version"] == ("SKIP", "TensorFlow 2.15.1 (no version expected)")
    assert got["build_cuda"] == ("SKIP", "built with CUDA 12.2 (nothing expected)")
    assert got["gpu_visible"] == (
        "FAIL",
        "gpu_visible crashed: RuntimeError: CUDA driver initialization failed, you might not "
        "have a CUDA gpu.",
    )
    entry = next(c for c in result["checks"] if c["name"] == "gpu_visible")
    assert entry["error"]["where"].startswith("__init__.py:")
    assert "Traceback" not in err


def test_harness_killed_halfway_is_reported_by_the_runner(
    broken_images: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, result, _ = smoke_json(
        capsys, broken_images["segv"], "--framework", "tensorflow", "--gpus", "none"
    )
    assert code == 1
    assert result["status"] == "FAILED"
    last = result["checks"][-1]
    assert last["name"] == "harness"
    assert last["reason"].startswith("the harness died before reporting (killed by SIGSEGV)")
    assert last["exit_code"] == 139
    assert result["image"]["ref"] == broken_images["segv"]


def test_a_hanging_harness_is_stopped(
    broken_images: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, result, _ = smoke_json(
        capsys,
        broken_images["hang"],
        "--framework",
        "tensorflow",
        "--gpus",
        "none",
        "--timeout",
        "5",
    )
    assert code == 1
    assert result["checks"][-1]["reason"] == (
        "the harness did not finish within 5 s; the container was stopped"
    )


def test_harness_log_is_streamed_while_the_container_runs(
    broken_images: dict[str, str],
) -> None:
    """With --verbose, envlock's stderr, read through a pipe, gets the harness's
    first line before the harness pauses, not when the container has ended."""
    cmd = [sys.executable, "-m", "envlock", "smoke", broken_images["chatty"]]
    cmd += ["--framework", "tensorflow", "--gpus", "none", "--json", "--verbose"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None and proc.stdout is not None
    arrivals: list[tuple[float, str]] = []
    with proc:
        for line in proc.stderr:
            arrivals.append((time.monotonic(), line.rstrip("\n")))
        stdout = proc.stdout.read()
        proc.wait(timeout=120)
        ended = time.monotonic()
    lines = [text for _, text in arrivals]
    first = lines.index("fake-tf: importing, this takes a while")
    second = lines.index("fake-tf: imported")
    assert first < second
    # the pause inside the container lies between the two lines as envlock saw them
    gap = arrivals[second][0] - arrivals[first][0]
    assert gap >= CHATTY_PAUSE - 1.0, (gap, lines)
    assert ended - arrivals[first][0] >= CHATTY_PAUSE - 1.0
    assert lines.count("fake-tf: importing, this takes a while") == 1  # not repeated at the end
    assert proc.returncode == 1
    result = json.loads(stdout)  # stdout is the whole JSON document, nothing else
    assert result["status"] == "FAILED"
    assert checks(result)["gpu_visible"][1].startswith("gpu_visible crashed: RuntimeError")


def test_missing_image_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["smoke", "envlock-test/h5-never-built:0"]) == 2
    err = capsys.readouterr().err
    assert "no image 'envlock-test/h5-never-built:0' in this Docker Engine" in err
    assert "hint: build it with `envlock build DIR --tag NAME`" in err


@pytest.mark.parametrize("argv", [["smoke", "envlock-test/any:1"], ["smoke", "x", "--gpus", "1"]])
def test_dead_daemon_is_exit_3(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/envlock-test-docker.sock")
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert "cannot reach the Docker Engine at unix:///nonexistent/envlock-test-docker.sock" in err
    assert "hint: start one" in err
    assert "Traceback" not in err
