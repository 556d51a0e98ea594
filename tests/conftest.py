"""Shared test setup: markers that skip with a reason, or fail in CI.

- ``docker``: needs a Docker Engine. Without one the test is skipped, naming
  why, unless ENVLOCK_REQUIRE_DOCKER=1 (set by .ci/run), which makes it fail.
  Under tests/run.sh it first waits for the engine's set-up, which runs beside
  the first tests (ENVLOCK_TEST_DOCKER_SETUP).
- ``gpu``: needs an NVIDIA GPU (nvidia-smi that lists one).
- ``network``: uses the real package index; ENVLOCK_NO_NETWORK=1 skips them.

And the local package index (tests/fixtures/index/fakeindex.py) as fixture
factories: ``make_index`` (servers stopped after the test) and
``make_module_index`` (stopped after the module), each a function that starts
a server and returns its ``FakeIndex``; add files before or after the start.

The budget: a test whose call takes more than 30 s carries the ``slow``
marker with its reason; the end of a run lists the ones that do not. With
ENVLOCK_TEST_CPU=PREFIX each pytest process writes PREFIX.<worker>.json: the CPU
seconds of each test (setup, call and teardown; this process and the
subprocesses it waited for: not Docker's containers), which the wall times of a
loaded run do not show (tests/pythons_select.py reads them too), and
PREFIX.wall.<worker>.json: when each test started and ended (tests/module_weights.py
reads both).

The fast tier (``pytest --fast``; ``tests/run.sh --fast``): every test without
one of the markers in FAST_LEFT_OUT. Under --fast a test of the tier that starts
what those markers stand for (a venv or an install, another Python, mount,
Chromium; a connection to the Docker Engine or off this machine) fails at its
teardown, naming the marker it lacks (_fast_guard: it sees what the pytest
process itself starts or connects to, envlock's in-process commands included,
not what a script or ``python -m envlock`` it runs starts in turn).

This file is also loaded by the CPython 3.8 run of the harness tests
(tests/run.sh): it keeps to syntax 3.8 runs and imports the index lazily.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from fixtures.index.fakeindex import FakeIndex, FakeWheel

REPO = Path(__file__).resolve().parent.parent

# The markers that leave a test out of the fast tier; the first four are
# pyproject.toml's, the others registered here (pytest_configure).
FAST_LEFT_OUT = ("docker", "gpu", "network", "slow", "venv", "other_python", "root", "chromium")
MARKERS = {
    "venv": "makes a real venv or installs into one (python -m venv, uv venv, uv or pip "
    "install, an envlock restore, a bootstrap.sh that builds one); not in the fast tier",
    "other_python": "runs a Python other than the one running pytest (pyenv's CPython 3.8, "
    "the 3.10 a restore finds on PATH); not in the fast tier",
    "root": "does what needs root (mounts a tmpfs; skipped elsewhere); not in the fast tier",
    "chromium": "runs headless Chromium; not in the fast tier",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="the fast tier only: leave out tests marked " + ", ".join(FAST_LEFT_OUT)
        + "; a test of the tier that does what they mark fails (tests/conftest.py)",
    )  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    _own_state_dir(config)
    for name, meaning in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")
    if config.getoption("fast"):
        sys.addaudithook(_fast_guard)


# the test running now under --fast (node id), and what it did that the tier leaves out
_guard: dict[str, Any] = {"test": None, "found": {}}
_GUARDED_EVENTS = frozenset(("subprocess.Popen", "os.posix_spawn", "os.exec", "socket.connect"))


def _fast_guard(event: str, args: tuple[Any, ...]) -> None:
    """Audit hook (--fast only): note what the running test starts or connects to
    that a marker in FAST_LEFT_OUT stands for; its teardown fails on it."""
    if event not in _GUARDED_EVENTS or _guard["test"] is None:
        return  # first: the hook sees every audited event (each open, import, ...)
    test = _guard["test"]
    try:
        if event == "socket.connect":
            marker = _left_out_connect(args[0], args[1])
            what = f"connected to {args[1]!r}"
        else:
            argv = args[1] if isinstance(args[1], (list, tuple)) else [args[1]]
            argv = [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in argv]
            marker = _left_out_command(os.fsdecode(args[0]) if args[0] else argv[0], argv)
            what = f"started {' '.join(argv)[:200]!r}"
    except Exception as e:  # raised here, it would fail the call audited, not say why
        marker, what = "?", f"made tests/conftest.py's _fast_guard fail on {event}: {e!r}"
    if marker:
        _guard["found"].setdefault(test, []).append(f"{what} (marker {marker})")


def _left_out_command(executable: str, argv: list[str]) -> str | None:
    """The marker of FAST_LEFT_OUT that running ``argv`` calls for, if any."""
    name = os.path.basename(executable)
    words = argv[1:]
    if name in ("mount", "umount", "sudo"):
        return "root"
    if name.startswith("chromium") or name in ("chrome", "google-chrome"):
        return "chromium"
    if name == "uv":
        if words[:1] in (["venv"], ["sync"]) or words[:2] in (
            ["pip", "install"], ["pip", "sync"], ["pip", "uninstall"], ["python", "install"]
        ):  # fmt: skip
            return "venv"
        return None
    if re.fullmatch(r"python[0-9.]*", name):
        path = shutil.which(executable) or executable
        if os.path.realpath(path) != os.path.realpath(sys.executable):
            return "other_python"
        if words[:2] == ["-m", "venv"]:
            return "venv"
        if words[:1] == ["-m"]:
            words = words[1:]  # python -m pip ...
    if words[:1] == ["pip"] or re.fullmatch(r"pip[0-9.]*", name):
        rest = words[1:] if words[:1] == ["pip"] else words
        if rest[:1] in (["install"], ["uninstall"]) and "--dry-run" not in rest:
            return "venv"
    return None


def _left_out_connect(sock: socket.socket, address: Any) -> str | None:
    """``docker`` for the Engine's own socket (tests that point DOCKER_HOST at a
    socket no engine serves are in the tier), ``network`` for a host not this one."""
    if sock.family == socket.AF_UNIX:
        path = os.fsdecode(address)
        return "docker" if re.search(r"(^|/)run/(user/[0-9]+/)?docker\.sock$", path) else None
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple):
        return None
    host = str(address[0])
    try:
        return None if ipaddress.ip_address(host.split("%")[0]).is_loopback else "network"
    except ValueError:
        return None if host == "localhost" else "network"


def _own_state_dir(config: pytest.Config) -> None:
    """envlock's own state (the undo store, the key its records are signed with:
    envlock.userstate) goes to a folder of this pytest process, not the home of
    whoever runs the tests; envlock commands the tests start inherit it."""
    import tempfile

    if "ENVLOCK_STATE_DIR" not in os.environ:
        folder = tempfile.mkdtemp(prefix="envlock-test-state-")
        os.environ["ENVLOCK_STATE_DIR"] = folder
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        config.add_cleanup(lambda: os.environ.pop("ENVLOCK_STATE_DIR", None))


@pytest.fixture(autouse=True)
def _wide_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables print at 300 columns unless a test sets COLUMNS itself: under pytest
    stdout is no terminal, so envlock would wrap them at 100 (envlock.output.width),
    and tests that look for a phrase inside one table cell would find it split.
    The width rule has its own tests (the resolve goldens run at COLUMNS=80)."""
    monkeypatch.setenv("COLUMNS", "300")


@functools.lru_cache(maxsize=1)
def docker_setup_problem() -> str | None:
    """tests/run.sh runs tests/docker/setup.sh beside the first tests and names, in
    ENVLOCK_TEST_DOCKER_SETUP, the folder whose ``rc`` file gets its exit status:
    wait for it (a Docker test needs the engine, the base image and the registry it
    makes). None when it succeeded or nothing is set up beside the run."""
    folder = os.environ.get("ENVLOCK_TEST_DOCKER_SETUP")
    if not folder:
        return None
    rc, deadline = Path(folder) / "rc", time.monotonic() + 900
    while not rc.is_file():
        if time.monotonic() > deadline:
            return (
                f"tests/docker/setup.sh, run by tests/run.sh, did not end in 15 minutes ({folder})"
            )
        time.sleep(0.2)
    status = rc.read_text(encoding="utf-8").strip()
    if status == "0":
        return None
    log = (Path(folder) / "log").read_text(encoding="utf-8", errors="replace")
    return f"tests/docker/setup.sh failed (exit {status}); the end of its output:\n{log[-2000:]}"


@functools.lru_cache(maxsize=1)
def docker_problem() -> str | None:
    """None when an engine answers, else why not (asked after tests/run.sh's
    Docker set-up has ended: docker_setup_problem)."""
    from envlock.errors import EnvironmentFailure
    from envlock.image import engine

    try:
        # envlock's own connect: it closes the socket of a failed connect, which
        # docker-py leaves to the garbage collector (a ResourceWarning, so a failure,
        # in whatever test runs when it is collected)
        engine.connect(timeout=10).close()
    except ImportError as e:  # pragma: no cover
        return f"the docker SDK is not installed ({e})"
    except EnvironmentFailure as e:
        return f"no Docker Engine answers ({e.message}); run tests/docker/setup.sh as root"
    return None


@functools.lru_cache(maxsize=1)
def gpu_problem() -> str | None:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return "no NVIDIA GPU here (nvidia-smi not found)"
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"nvidia-smi failed: {e}"
    if out.returncode != 0 or "GPU" not in out.stdout:
        return "nvidia-smi lists no GPU"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("docker"):
        problem = docker_setup_problem() or docker_problem()
        if problem:
            from docker_support import docker_unavailable

            docker_unavailable(problem)
        _check_base_image(item, "before")
    if item.get_closest_marker("gpu"):
        problem = gpu_problem()
        if problem:
            pytest.skip(problem)
    if item.get_closest_marker("network") and os.environ.get("ENVLOCK_NO_NETWORK") == "1":
        pytest.skip("ENVLOCK_NO_NETWORK=1: tests that use the real package index are off")


_BASE_SEEN = pytest.StashKey[bool]()


def _check_base_image(item: pytest.Item, when: str) -> None:
    """A Docker test that uses the shared base image finds it there, and leaves it:
    one that removed it (a cleanup that force-removes an image by id removes every
    tag it has) would otherwise show up as the next builds failing to pull it from
    Docker Hub, in other modules and on other workers."""
    if "base_image" not in getattr(item, "fixturenames", ()):
        return
    from docker_support import image_present

    ref = _base_ref()
    if when == "after" and not item.stash.get(_BASE_SEEN, False):
        return  # missing before the test already: reported then
    if image_present(ref):
        item.stash[_BASE_SEEN] = True
        return
    if when == "before":
        pytest.fail(f"the base image {ref} is gone: an earlier test removed it "
                    "(tests/docker/setup.sh builds it again)", pytrace=False)  # fmt: skip
    pytest.fail(f"the base image {ref} was removed by this test or its fixtures' cleanup",
                pytrace=False)  # fmt: skip


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    result = yield
    if item.get_closest_marker("docker") and docker_problem() is None:
        _check_base_image(item, "after")
    found = _guard["found"].pop(item.nodeid, None)
    if found:
        pytest.fail("in the fast tier (--fast), this test (its fixtures included) "
                    + "; ".join(dict.fromkeys(found)) + ": give it that marker "
                    "(tests/conftest.py, FAST_LEFT_OUT)", pytrace=False)  # fmt: skip
    return result


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under --fast, only the fast tier: the tests without a marker of FAST_LEFT_OUT
    (the others deselected). Then the order: _longest_modules_first."""
    if config.getoption("fast"):
        out = [item for item in items if any(item.get_closest_marker(m) for m in FAST_LEFT_OUT)]
        if out:
            config.hook.pytest_deselected(items=out)
            left_out = set(out)
            items[:] = [item for item in items if item not in left_out]
    _longest_modules_first(items)


def _longest_modules_first(items: list[pytest.Item]) -> None:
    """Long modules first (longest-processing-time-first scheduling): by the wall
    seconds tests/module-times.json records for each module in a full run
    (tests/module_weights.py makes it), a module it lacks after the measured ones, or
    before them if it has a slow test. With --dist loadfile a worker takes a
    whole module, and a long module taken late ran alone at the end of the run
    while the other workers had nothing left (one of this machine's two cores
    idle for the last 90-240 s of the main run). Tests keep their order inside
    each module, and modules of the same weight their order. pytest-xdist keeps
    this order only with --no-loadscope-reorder (tests/run.sh passes it): by
    default its loadfile scheduler hands out the modules with the most tests
    first, which put test_restore_tf (one test, ~80 s) last."""
    import json

    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[0]

    try:
        doc = json.loads((REPO / "tests" / "module-times.json").read_text(encoding="utf-8"))
        measured: dict[str, float] = {m: t["wall"] for m, t in doc["modules"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        measured = {}
    top = max(measured.values(), default=0.0)
    slow = {module(item) for item in items if item.get_closest_marker("slow")}

    def weight(name: str) -> float:
        if name in measured:
            return measured[name]
        return top + 1 if name in slow else 0.0

    items.sort(key=lambda item: -weight(module(item)))


_cpu_by_test: dict[str, float] = {}
_wall_by_test: dict[str, list[float]] = {}


def _cpu_seconds() -> float:
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    _guard["test"] = item.nodeid  # for _fast_guard (--fast)
    try:
        yield from _timed(item)
    finally:
        _guard["test"] = None


def _timed(item: pytest.Item) -> Iterator[None]:
    if not os.environ.get("ENVLOCK_TEST_CPU"):
        yield
        return
    import time

    start, began = _cpu_seconds(), time.time()
    yield
    _cpu_by_test[item.nodeid] = _cpu_seconds() - start
    _wall_by_test[item.nodeid] = [began, time.time()]


def pytest_sessionfinish(session: pytest.Session) -> None:
    prefix = os.environ.get("ENVLOCK_TEST_CPU")
    if prefix and _cpu_by_test:
        import json

        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        Path(prefix).parent.mkdir(parents=True, exist_ok=True)  # the first writer makes it
        Path(f"{prefix}.{worker}.json").write_text(json.dumps(_cpu_by_test), encoding="utf-8")
        Path(f"{prefix}.wall.{worker}.json").write_text(json.dumps(_wall_by_test), encoding="utf-8")


SLOW_BUDGET_S = 30.0
_over_budget: list[tuple[str, float]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    over = report.when == "call" and report.duration > SLOW_BUDGET_S
    if over and "slow" not in report.keywords:
        _over_budget.append((report.nodeid, report.duration))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _over_budget:
        terminalreporter.section(f"over the {SLOW_BUDGET_S:.0f} s budget without the slow marker")
        for nodeid, seconds in sorted(_over_budget, key=lambda x: -x[1]):
            terminalreporter.write_line(f"{seconds:.1f} s {nodeid}: mark it slow and say why")


@pytest.fixture(scope="session")
def base_image() -> str:
    """The local base image made by tests/docker/setup.sh."""
    return _base_ref()


def _base_ref() -> str:
    return os.environ.get("ENVLOCK_TEST_BASE_IMAGE", "envlock-test/bookworm-python:1")


def _index_factory() -> Iterator[Callable[..., FakeIndex]]:
    from fixtures.index.fakeindex import FakeIndex

    started: list[FakeIndex] = []

    def start(*files: FakeWheel, **options: Any) -> FakeIndex:
        """A running index serving ``files``; ``options`` are FakeIndex fields
        (faults, ignore_range, json_api)."""
        idx = FakeIndex(**options)
        for f in files:
            idx.add(f)
        started.append(idx.start())
        return idx

    try:
        yield start
    finally:
        for idx in started:
            idx.stop()


@pytest.fixture
def make_index() -> Iterator[Callable[..., FakeIndex]]:
    """Start local indexes for one test: ``make_index(*files, **options)``."""
    yield from _index_factory()


@pytest.fixture(scope="module")
def make_module_index() -> Iterator[Callable[..., FakeIndex]]:
    """Start local indexes shared by a module's tests (stopped after the module)."""
    yield from _index_factory()


@pytest.fixture(scope="session")
def shared_uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One uv cache for the run's tests that install real TensorFlow but do not
    test a cache: after the first such install, each later one reads the 500 MB
    of wheels from here instead of unpacking them again. Shared by the xdist
    workers (uv locks its cache, so concurrent installs are safe); a test of
    uv's own cache behaviour keeps a fresh UV_CACHE_DIR of its own."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = root / "uv-cache-shared"
    path.mkdir(exist_ok=True)
    return path
