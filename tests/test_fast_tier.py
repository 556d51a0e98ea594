"""The fast tier's guard (tests/conftest.py, --fast): which commands and connections
call for a marker that leaves a test out of the tier, and which do not."""

from __future__ import annotations

import socket
import sys

import pytest
from conftest import FAST_LEFT_OUT, _left_out_command, _left_out_connect

PY = sys.executable


@pytest.mark.parametrize(
    ("argv", "marker"),
    [
        ([PY, "-m", "venv", "--without-pip", "/tmp/v"], "venv"),
        (["/x/bin/uv", "venv", "-q", "/tmp/v"], "venv"),
        (["uv", "pip", "install", "-q", "--python", "/tmp/v/bin/python", "dep-a"], "venv"),
        (["uv", "pip", "sync", "requirements.txt"], "venv"),
        (["uv", "python", "install", "3.12"], "venv"),
        ([PY, "-m", "pip", "install", "--no-deps", "dep-a==1.0"], "venv"),
        ([PY, "-m", "pip", "uninstall", "-y", "dep-c"], "venv"),
        (["/tmp/v/bin/pip", "install", "six"], "venv"),
        (["/nowhere/bin/python3.8", "harness.py"], "other_python"),
        (["mount", "-t", "tmpfs", "tmpfs", "/tmp/d"], "root"),
        (["/usr/bin/chromium", "--headless", "--dump-dom", "file:///x"], "chromium"),
        # what the tier may run: resolving against the local index, pip's dry run,
        # this interpreter, a shell
        (["uv", "pip", "compile", "-q", "requirements.in"], None),
        ([PY, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--report", "-"], None),
        ([PY, "-m", "pip", "--version"], None),
        ([PY, "-m", "envlock", "resolve", "tensorflow==2.15"], None),
        (["bash", "-n", "bootstrap.sh"], None),
        (["/usr/local/bin/docker", "buildx", "version"], None),
    ],
)
def test_each_command_calls_for_its_marker(argv: list[str], marker: str | None) -> None:
    assert _left_out_command(argv[0], argv) == marker
    assert marker is None or marker in FAST_LEFT_OUT


@pytest.mark.parametrize(
    ("family", "address", "marker"),
    [
        (socket.AF_UNIX, "/var/run/docker.sock", "docker"),
        (socket.AF_UNIX, "/run/user/1000/docker.sock", "docker"),
        (socket.AF_UNIX, "/tmp/pytest-of-x/no-daemon.sock", None),  # no engine: in the tier
        (socket.AF_INET, ("127.0.0.1", 9), None),
        (socket.AF_INET, ("localhost", 80), None),
        (socket.AF_INET6, ("::1", 443, 0, 0), None),
        (socket.AF_INET, ("192.0.2.1", 443), "network"),
        (socket.AF_INET, ("mirror.invalid", 443), "network"),
    ],
)
def test_each_connection_calls_for_its_marker(
    family: socket.AddressFamily, address: object, marker: str | None
) -> None:
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        assert _left_out_connect(sock, address) == marker
