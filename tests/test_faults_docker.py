"""Docker stopped in the middle of ``envlock build``: exit 3 naming the step.

The shared Docker Engine is never touched: the test starts its own dockerd on
its own socket, data root and exec root, loads the base image into it from the
shared engine, starts ``envlock build`` against it on a bundle whose third step
sleeps, and kills that dockerd (SIGKILL, by its own pid) while the step runs.
Everything it started (dockerd, its containerd, shims, the step's process) is
found by pid (command lines naming this run's own folders, and their
children) and ended one by one; its mounts are unmounted and its folders
removed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from docker_support import docker_unavailable

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SLOW_STEP = "RUN echo slow step starts && sleep 45 && echo slow step ends"


def _ps() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process."""
    out: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out[int(entry)] = (ppid, cmd)
    return out


def _ours(root: str, first: int) -> list[int]:
    """``first`` and every process whose command line names ``root``, with all their children."""
    procs = _ps()
    found = {pid for pid, (_pp, cmd) in procs.items() if root in cmd}
    if first in procs:
        found.add(first)
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _cmd) in procs.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    found.discard(os.getpid())
    return sorted(found)


@pytest.fixture
def own_dockerd(base_image: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A dockerd of this test only: (DOCKER_HOST value, its process)."""
    if os.geteuid() != 0:
        docker_unavailable("starting a dockerd of the test's own needs root")
    dockerd, docker = shutil.which("dockerd"), shutil.which("docker")
    if not dockerd or not docker:
        docker_unavailable("dockerd or the docker CLI is not installed")
    root = f"/tmp/envlock-fault-{os.getpid()}"
    host = f"unix://{root}-docker.sock"
    log = open(f"{root}-dockerd.log", "wb")  # noqa: SIM115 - closed in the teardown
    proc = subprocess.Popen(
        [
            dockerd,
            "--host",
            host,
            "--data-root",
            f"{root}-data",
            "--exec-root",
            f"{root}-exec",
            "--pidfile",
            f"{root}-docker.pid",
            "--bridge=none",
            "--iptables=false",
            "--ip6tables=false",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    env = {**os.environ, "DOCKER_HOST": host}
    try:
        for _ in range(120):
            if proc.poll() is not None:
                why = f"the test's own dockerd exited ({proc.returncode}); see {log.name}"
                docker_unavailable(why)
            ok = subprocess.run([docker, "info"], env=env, capture_output=True, check=False)
            if ok.returncode == 0:
                break
            time.sleep(0.5)
        else:
            why = f"the test's own dockerd did not answer within a minute; see {log.name}"
            docker_unavailable(why)
        save = subprocess.Popen([docker, "save", base_image], stdout=subprocess.PIPE)
        load = subprocess.run(
            [docker, "load"], env=env, stdin=save.stdout, capture_output=True, check=False
        )
        assert save.stdout is not None
        save.stdout.close()
        assert save.wait() == 0 and load.returncode == 0, load.stderr
        yield host, proc
    finally:
        for pid in reversed(_ours(root, proc.pid)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
        log.close()
        mounts = [
            line.split()[1]
            for line in Path("/proc/mounts").read_text().splitlines()
            if line.split()[1].startswith(root)
        ]
        for mount in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
        for suffix in ("-data", "-exec"):
            shutil.rmtree(f"{root}{suffix}", ignore_errors=True)
        for suffix in ("-docker.sock", "-docker.pid", "-dockerd.log"):
            with contextlib.suppress(OSError):
                os.unlink(f"{root}{suffix}")


def test_docker_killed_mid_build_exits_3_naming_the_step(
    own_dockerd: tuple[str, subprocess.Popen[bytes]], tmp_path: Path, base_image: str
) -> None:
    host, dockerd = own_dockerd
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "Dockerfile").write_text(
        f"FROM {base_image}\nRUN echo first step\n{SLOW_STEP}\nRUN echo never\n",
        encoding="utf-8",
    )
    build = subprocess.Popen(
        [sys.executable, "-m", "envlock", "build", str(bundle), "--progress", "plain"]
        + ["--network", "none", "--no-cache"],
        env={**os.environ, "DOCKER_HOST": host},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert build.stderr is not None
    seen: list[str] = []
    try:
        for line in build.stderr:
            seen.append(line)
            if line.strip() == "slow step starts":
                break
        else:
            pytest.fail("the slow step never started:\n" + "".join(seen))
        dockerd.send_signal(signal.SIGKILL)  # the test's own dockerd, by its pid
        rest = build.stderr.read()
        code = build.wait(timeout=120)
    finally:
        if build.poll() is None:
            build.kill()
            build.wait()
        for pipe in (build.stdout, build.stderr):
            if pipe is not None:
                pipe.close()
    err = "".join(seen) + rest
    message = err[err.find("envlock: error:") :]
    assert code == 3, err
    # the engine's own count: the four lines of the Dockerfile plus what the classic
    # builder adds for build-time labels (envlock's OCI labels)
    total = re.search(r"^Step 1/(\d+) : FROM ", err, re.MULTILINE)
    assert total is not None and int(total.group(1)) >= 4, err
    assert message.startswith(
        "envlock: error: the Docker Engine stopped answering during the build, "
        f"at step 3/{total.group(1)} ({SLOW_STEP}):"
    ), err
    assert "  | slow step starts\n" in message  # the log's last lines come with it
    assert "hint: check that the engine is running" in message
    assert "the connection to the engine broke off" in message
    assert "\nslow step ends" not in err and "Traceback" not in err
