"""What a doctor finding is, and the commands its fix holds.

``Finding`` and ``Context`` are the data ``envlock.doctor.findings`` judges
with; the builders here make each fix a command that works pasted as it
stands: it names the bundle checked against and the environment inspected
(``restore_command``), installs one locked distribution with the lock's own
hashes (``pip_fix``), or locks another release keeping the lock's pins and
CUDA source (``lock_command``, ``driver_fix``). ``installed`` and ``_version``
read the probe for both ``findings`` and ``gpu_findings``.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypedDict

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envlock.driver import HostInfo
from envlock.model import Lock, Resolution

if TYPE_CHECKING:
    from envlock.bundle.left_out import LeftOut
    from envlock.resolve.floors import HostFloor
    from envlock.resolve.paths import GpuPaths
    from envlock.venv.probe import Dist, ProbeDoc, PythonInfo


STATUSES = ("PASS", "WARN", "FAIL", "INFO")


class _FindingHead(TypedDict):
    check: str
    status: str
    cause: str
    fix: str
    manual: bool


class StepDict(TypedDict):
    kind: str  # run: a command to paste as it stands; do: a step by hand
    text: str


class WayDict(TypedDict):
    label: str  # what this way does ("back to tensorflow 2.15.1, the lock's")
    steps: list[StepDict]


class FindingDict(_FindingHead, total=False):
    """A finding as envlock doctor --json writes it. ``ways``: the ways out (several:
    alternatives, take one of them, not all), each with its label and its steps in
    order; ``fix`` and ``alternatives`` say the same ways as one text each."""

    alternatives: list[str]
    ways: list[WayDict]
    folded: list[FindingDict]


class HostGpuDict(TypedDict):
    name: str
    compute_capability: str | None


class HostDict(TypedDict):
    driver: str
    source: str  # NVML | nvidia-smi
    gpus: list[HostGpuDict]


class DoctorReport(TypedDict, total=False):
    """envlock doctor --json (schema envlock.doctor/v1)."""

    schema: str
    lock: str | None  # the bundle checked against
    interpreter: dict[str, str]  # python, chosen_by, reason
    python: PythonInfo | None
    host: HostDict | None
    log: str
    freeze: str  # --freeze FILE: the package list judged as the environment
    status: str
    findings: list[FindingDict]


@dataclass(frozen=True)
class Way:
    """One way out of a finding: what it does (``label``, empty for the only way)
    and its steps in order, each ``("run", command)`` to paste as it stands or
    ``("do", step)`` to take by hand (it says what and where)."""

    label: str
    steps: tuple[tuple[str, str], ...]

    @property
    def manual(self) -> bool:
        return any(kind == "do" for kind, _ in self.steps)

    @property
    def text(self) -> str:
        """The way as one text: its commands joined by ``&&`` (one command still),
        or its steps joined by '; then' when one is by hand."""
        joiner = "; then " if self.manual else " && "
        return joiner.join(text for _, text in self.steps)

    def to_dict(self) -> WayDict:
        return WayDict(label=self.label, steps=[StepDict(kind=k, text=t) for k, t in self.steps])


def run(command: str) -> tuple[str, str]:
    return ("run", command)


def do(step: str) -> tuple[str, str]:
    return ("do", step)


@dataclass(frozen=True)
class Finding:
    check: str  # "python", "package numpy", "driver", "library libcudnn.so.8", "log ..."
    status: str  # one of STATUSES
    cause: str
    # a command to paste as it stands (it names the inspected environment and the
    # bundle), or, with ``manual``, the exact steps no command can take
    fix: str = ""
    manual: bool = False
    alternatives: tuple[str, ...] = ()  # other commands that fix it, as pasteable
    # the findings this one is the cause of, folded under it (their count in the text)
    folded: tuple[Finding, ...] = ()
    # the ways out, labelled, when there are several (``choice`` fills fix,
    # manual and alternatives from them); () : fix and alternatives are the ways
    either: tuple[Way, ...] = ()

    @property
    def ways(self) -> tuple[Way, ...]:
        """The ways out: ``either``, else the fix and each alternative (unlabelled)."""
        if self.either:
            return self.either
        if not self.fix:
            return ()
        first = Way("", (do(self.fix) if self.manual else run(self.fix),))
        return (first, *(Way("", (run(a),)) for a in self.alternatives))

    def to_dict(self) -> FindingDict:
        out = FindingDict(
            check=self.check,
            status=self.status,
            cause=self.cause,
            fix=self.fix,
            manual=self.manual,
        )
        if self.alternatives:
            out["alternatives"] = list(self.alternatives)
        if self.ways:
            out["ways"] = [w.to_dict() for w in self.ways]
        if self.folded:
            out["folded"] = [f.to_dict() for f in self.folded]
        return out


def choice(
    check: str,
    status: str,
    cause: str,
    ways: tuple[Way, ...] | list[Way],
    folded: tuple[Finding, ...] = (),
) -> Finding:
    """A finding whose ways out are ``ways`` (the first is ``fix``, the others
    ``alternatives``, each as one text): several ways are alternatives, labelled."""
    ways = tuple(w for w in ways if w.steps)
    first = ways[0] if ways else None
    return Finding(
        check,
        status,
        cause,
        first.text if first else "",
        first.manual if first else False,
        tuple(w.text for w in ways[1:]),
        folded,
        either=ways if len(ways) > 1 or any(len(w.steps) > 1 for w in ways) else (),
    )


@dataclass(frozen=True)
class Context:
    """What the findings are judged against."""

    lock: Lock | None  # the bundle's lock, if --lock was given
    lock_dir: str | None  # how to name the bundle in a fix
    expected: Resolution | None  # the lock's resolution, else that of the installed TF
    host: HostInfo | None  # driver and GPUs, None when no driver is visible
    host_problem: str  # why there is no host info ("" when there is)
    allow_cpu: bool = False
    # the inspected environment: its venv folder (None when the interpreter is not
    # in a venv) and its interpreter, named in every fix
    venv: str | None = None
    python: str | None = None
    # a Python minor -> the newest TensorFlow release with wheels for it (resolve)
    python_fits: Callable[[str], Resolution | None] | None = None
    # driver -> the newest release that runs on it here (resolve's answer), or None
    fits: Callable[[str], Resolution | None] | None = None
    # the expected release's driver floor for the host's GPUs: resolve's own
    # (envlock.resolve.floors.host_floor, PTX JIT included); None: the lock's driver_min
    floor: HostFloor | None = None
    # the verdict per execution path for each host GPU (envlock.resolve.paths, the
    # function resolve and smoke use), from the installed ptxas and cuDNN
    paths: tuple[GpuPaths, ...] = ()
    # doctor runs in a notebook (%envlock): the fixes are cell lines acting on the
    # kernel's interpreter (``python``), with the restart the kernel needs
    notebook: bool = False
    # --driver VERSION / --gpu NAME as given to doctor: the host is the one they
    # describe (a rehearsal), and a printed lock command repeats them instead of
    # reading this machine with --driver auto; () when nothing is rehearsed
    rehearsed: tuple[str, ...] = ()
    # the lines the capture left out of the lock (DIR/left-out.json): not locked, so
    # not checked (an installed one is no "installed but not locked" warning)
    left_out: tuple[LeftOut, ...] = ()


def restore_command(ctx: Context) -> str:
    """``envlock restore DIR --venv VENV``: the bundle checked against and the
    environment inspected (restore's own default may be another one); an
    interpreter outside a venv is synced ``--in-place`` (a new venv cannot replace
    it). The one builder restore itself uses (``envlock.venv.install``)."""
    from pathlib import Path

    from envlock.venv.install import RestoreRequest
    from envlock.venv.install import restore_command as command

    bundle = Path(ctx.lock_dir or "DIR")
    if ctx.notebook and ctx.python:  # the running kernel's own environment, in place
        venv, in_place = Path(ctx.python), True
    elif ctx.venv or not ctx.python:
        venv, in_place = Path(ctx.venv or bundle / ".venv"), False
    else:
        venv, in_place = Path(ctx.python), True
    # --allow-cpu: the check was asked to accept the CPU, so is restore's smoke test
    return command(RestoreRequest(bundle, venv, allow_cpu=ctx.allow_cpu, in_place=in_place))


def _repair(ctx: Context) -> str:
    if ctx.lock_dir:
        return restore_command(ctx)
    return "reinstall it"


def pip_fix(ctx: Context, name: str, version: str) -> str | None:
    """One locked distribution installed into the inspected interpreter with its
    locked hashes (pip takes --hash only in a requirements file: stdin is one)."""
    if ctx.lock is None:
        return None
    pkg = next((p for p in ctx.lock.packages if p.name == name), None)
    if pkg is None:
        return None
    line = f"{name}=={version} " + " ".join(f"--hash=sha256:{h}" for h in pkg.hashes)
    if pkg.index and pkg.wheels and version == pkg.version:  # routed (--route): its locked file
        from envlock.lock.requirements import routed_wheel

        wheel = routed_wheel(pkg)
        line = f"{name} @ {wheel.url} --hash=sha256:{wheel.sha256}"
    python = shlex.quote(ctx.python or "python")
    return (
        f"printf '%s\\n' {shlex.quote(line)} | {python} -m pip install --no-deps "
        "--require-hashes -r /dev/stdin"
    )


def lock_command(ctx: Context, version: str, python: str, *, suffix: str) -> str:
    """``envlock lock`` of the lock's framework at ``version`` for ``python`` (torch:
    the lock's CUDA build; JAX: its plugin's extra), the lock's pins and CUDA source
    kept, into a new folder beside the bundle."""
    lock = ctx.lock
    spec = [f"tensorflow=={version}"]
    if lock is not None and lock.resolution.framework != "tensorflow":
        from dataclasses import replace

        spec = _spec_of(replace(lock.resolution, version=version))
        if spec[0].startswith("torch") and "--cuda" not in spec:
            spec += ["--cuda", lock.resolution.cuda]
    argv = ["envlock", "lock", *spec, "--python", python]
    if lock is not None and lock.resolution.cuda_source == "pip":
        argv += ["--cuda-source", "pip"]
    argv += _pins(ctx)
    base = (ctx.lock_dir or "env").rstrip("/") or "env"
    return shlex.join([*argv, "-o", f"{base}-{suffix}"])


# a fix carries at most this many pins as arguments; past it, it names the bundle
HANDFUL = 5


def _pins(ctx: Context) -> list[str]:
    """The lock's own pins for a new lock: ``--with PIN`` each, or past a handful
    ``--pins-from DIR`` (the bundle that records them)."""
    pins = ctx.lock.input.with_requirements if ctx.lock is not None else ()
    if len(pins) > HANDFUL and ctx.lock_dir:
        return ["--pins-from", ctx.lock_dir]
    return [arg for pin in pins for arg in ("--with", pin)]


def driver_fix(ctx: Context, fits: Resolution) -> str:
    """The lock command for the release that runs on this driver: the lock's pins
    kept, the same CUDA source, a new bundle folder beside the old one."""
    source = ctx.lock.resolution.cuda_source if ctx.lock is not None else None
    base = (ctx.lock_dir or "env").rstrip("/") or "env"
    argv = ["envlock", "lock", *_spec_of(fits)]
    if "--driver" not in ctx.rehearsed:
        argv += ["--driver", "auto"]
    argv += ctx.rehearsed
    if source == "pip":
        argv += ["--cuda-source", "pip"]
    argv += _pins(ctx)
    return shlex.join([*argv, "-o", f"{base}-{fits.framework}{fits.version}"])


def _spec_of(fits: Resolution) -> list[str]:
    """The SPEC (and flag) ``envlock lock`` takes for a resolution: a JAX build by its
    extra (``jax[cuda13]==0.11.2``), a torch build of PyTorch's own index by its CUDA
    (``torch==2.11.0 --cuda 12.8``: a SPEC takes no local label)."""
    if fits.framework == "jax":
        return [f"jax[cuda{fits.cuda.split('.')[0]}]=={fits.version}"]
    if fits.framework == "torch" and "+" in fits.version:
        return [f"torch=={fits.version.split('+')[0]}", "--cuda", fits.cuda]
    return [f"{fits.framework}=={fits.version}"]


def _version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def installed(probe: ProbeDoc) -> dict[str, Dist]:
    """Distributions by normalized name; the first on sys.path wins, as for import."""
    out: dict[str, Dist] = {}
    for dist in probe.get("distributions") or []:
        out.setdefault(canonicalize_name(str(dist.get("name", ""))), dist)
    return out


RESTART = (
    "restart the kernel (Jupyter: Kernel > Restart Kernel; Colab: Runtime > Restart "
    "session): until then it runs the packages it imported before"
)


def _changes_packages(command: str) -> bool:
    """A command that changes what the running kernel's interpreter has installed."""
    in_place = command.startswith("envlock restore ") and " --in-place" in command
    return in_place or " -m pip install " in command


def _cell_line(command: str) -> str:
    """A shell command as a notebook cell line: envlock's as ``%envlock``, an
    ``export NAME=VALUE`` as ``%env NAME=VALUE`` (the kernel's own environment),
    any other through the kernel's shell (``!``); a line that already is a cell line
    (``%envlock restore ... --in-place``, which the package-list doctor prints for the
    notebook it speaks of) as it is."""
    if command.startswith(("%", "!")):
        return command
    if command.startswith("envlock "):
        return f"%{command}"
    if command.startswith("export ") and "=" in command and " " not in command[7:]:
        return f"%env {command[7:]}"
    return f"!{command}"


def in_notebook(finding: Finding) -> Finding:
    """``finding`` with its ways as notebook cell lines (``_cell_line``), each way
    that changes installed packages followed by the kernel's restart (before the
    steps that set the kernel's environment, which a restart forgets)."""
    if not finding.fix and not finding.folded:
        return finding
    ways = []
    for way in finding.ways:
        steps = [(k, _cell_line(t) if k == "run" else t) for k, t in way.steps]
        last = max(
            (i for i, (k, t) in enumerate(way.steps) if k == "run" and _changes_packages(t)),
            default=None,
        )
        if last is not None:
            steps.insert(last + 1, do(RESTART))
        ways.append(Way(way.label, tuple(steps)))
    folded = tuple(in_notebook(f) for f in finding.folded)
    if not ways:
        return replace(finding, folded=folded)
    return choice(finding.check, finding.status, finding.cause, ways, folded)
