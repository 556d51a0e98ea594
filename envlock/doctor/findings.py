"""Compare what the probe saw with what the lock (or the venv itself) says.

Pure: the probe document, the lock, the host driver and a ``fits`` function
(which TensorFlow runs on a given driver) in; findings out. Each finding is
PASS, WARN, FAIL or INFO with a cause and a fix that uses what the lock knows.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from packaging.markers import InvalidMarker, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

if TYPE_CHECKING:
    from envlock.venv.probe import ErrorText, ProbeDoc

from envlock.doctor.advice import (
    Context,
    Finding,
    Way,
    _repair,
    _version,
    choice,
    installed,
    lock_command,
    pip_fix,
    run,
)
from envlock.doctor.gpu_findings import (
    check_cuda_packages,
    check_driver,
    check_gpus,
    check_libraries,
    check_paths,
)
from envlock.doctor.interpreter import TOOLING, _restore_steps

TF_NAMES = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly", "intel-tensorflow")


def overall(findings: Sequence[Finding]) -> str:
    statuses = {f.status for f in findings}
    return "FAILED" if "FAIL" in statuses else "WARNED" if "WARN" in statuses else "PASSED"


def tensorflow_installed(probe: ProbeDoc) -> str | None:
    dists = installed(probe)
    for name in TF_NAMES:
        if name in dists:
            return str(dists[name].get("version"))
    return None


def check_python(probe: ProbeDoc, ctx: Context) -> list[Finding]:
    version = str(probe.get("python", {}).get("version", ""))
    minor = ".".join(version.split(".")[:2])
    if not version and probe.get("freeze"):
        return [
            Finding(
                "python",
                "INFO",
                f"not judged: {probe.get('freeze')} names no Python; give the platform's "
                "with --python X.Y (its os-info file says it)",
            )
        ]
    if ctx.lock is None:
        return [Finding("python", "PASS", f"Python {version}")]
    want = ctx.lock.resolution.python
    if minor == want:
        return [Finding("python", "PASS", f"Python {version}, the locked {want}")]
    r = ctx.lock.resolution
    supported = r.python_supported
    cause = (
        f"Python {version} runs this environment; the lock is for Python {want} (the "
        f"platform changed its Python, or the venv was made with another one); "
        f"{r.framework} {r.version} has wheels for Python {', '.join(supported) or '?'}"
    )
    ways = [Way(f"a Python {want} environment again, the lock's", _restore_steps(ctx, want))]
    if minor in supported:
        cause += f", {minor} among them"
        ways.append(
            Way(
                f"lock {r.framework} {r.version} for Python {minor} (a new bundle)",
                (run(lock_command(ctx, r.version, minor, suffix=f"py{minor}")),),
            )
        )
    else:
        newer = ctx.python_fits(minor) if ctx.python_fits else None
        if newer is not None:
            cause += f"; for Python {minor}, {newer.framework} {newer.version} fits"
            ways.append(
                Way(
                    f"lock {newer.framework} {newer.version} for Python {minor} (a new bundle)",
                    (
                        run(
                            lock_command(
                                ctx,
                                newer.version,
                                minor,
                                suffix=f"{newer.framework}{newer.version}",
                            )
                        ),
                    ),
                )
            )
        else:
            cause += f"; no release in the matrix has wheels for Python {minor}"
    return [
        choice(
            "python",
            "FAIL",
            cause + f" (restore builds a Python {want} venv: it finds that Python or says how "
            "to get one)",
            ways,
        )
    ]


WHOLE = "the whole environment back to the lock"
ALONE = "only the packages that moved, with the lock's hashes (every command below)"


def check_packages(probe: ProbeDoc, ctx: Context) -> list[Finding]:
    """Missing, other version and extra distributions against the lock."""
    if ctx.lock is None:
        return []
    from envlock.doctor.builds import same_torch_build

    have = installed(probe)
    out: list[Finding] = []
    locked = {p.name: p.version for p in ctx.lock.packages}
    said = "listed" if probe.get("freeze") else "installed"  # a package list installs nothing
    for name, version in sorted(locked.items()):
        dist = have.get(name)
        if dist is None:
            cause = f"{name} {version} is locked but not {said}"
        elif _version(str(dist.get("version"))) != _version(version) and not same_torch_build(
            ctx, name, str(dist.get("version")), version
        ):
            cause = f"{name} {dist.get('version')} is {said}; the lock has {version}"
        else:
            continue
        alone = pip_fix(ctx, name, version)
        out.append(
            choice(
                f"package {name}",
                "FAIL",
                cause,
                [
                    Way(WHOLE, (run(_repair(ctx)),)),
                    *([Way(ALONE, (run(alone),))] if alone else []),
                ],
            )
        )
    unlocked = {item.name for item in ctx.left_out}  # named by their own finding
    extra = sorted(n for n in have if n not in locked and n not in TOOLING and n not in unlocked)
    if extra:
        shown = ", ".join(f"{n} {have[n].get('version')}" for n in extra[:10])
        more = f" and {len(extra) - 10} more" if len(extra) > 10 else ""
        out.append(
            Finding(
                "packages not in the lock",
                "WARN",
                f"{said} but not locked: {shown}{more}",
                "add them to the lock (the bundle's lock command with --with NAME==VERSION "
                "for each) or uninstall them (pip uninstall NAME in this environment)",
                manual=True,
            )
        )
    if not out:
        out.append(
            Finding("packages", "PASS", f"all {len(locked)} locked distributions at their versions")
        )
    return out


def unmet_requirements(probe: ProbeDoc) -> dict[str, list[str]]:
    """pip check: every Requires-Dist of every installed distribution (markers
    evaluated in the target interpreter) that is not met, by the name it concerns:
    ``{"numpy": ["tensorflow 2.15.1 requires numpy<2.0.0,>=1.23.5"]}``."""
    have = installed(probe)
    env = dict(probe.get("markers") or {})
    out: dict[str, list[str]] = {}
    for name, dist in sorted(have.items()):
        for line in dist.get("requires") or []:
            try:
                req = Requirement(str(line))
                if req.marker is not None and not req.marker.evaluate({**env, "extra": ""}):
                    continue
            except (InvalidRequirement, InvalidMarker, UndefinedEnvironmentName):
                continue
            dep = canonicalize_name(req.name)
            got = have.get(dep)
            if got is not None:
                got_version = _version(str(got.get("version")))
                if got_version is None or req.specifier.contains(got_version, prereleases=True):
                    continue
            req.marker = None  # evaluated: true here
            out.setdefault(dep, []).append(f"{name} {dist.get('version')} requires {req}")
    return out


def _installed_as(probe: ProbeDoc, dep: str) -> str:
    got = installed(probe).get(dep)
    return f"{dep} {got.get('version')} is installed" if got else f"{dep} is not installed"


def check_requirements(
    probe: ProbeDoc, ctx: Context, unmet: dict[str, list[str]], reported: set[str]
) -> list[Finding]:
    """One finding per name with an unmet requirement, on the name it concerns
    ("numpy 2.1.3 is installed; tensorflow 2.15.1 requires numpy<2.0.0,>=1.23.5");
    a name in ``reported`` has its own row already (the package findings), which
    says it (``judge``). The PASS row only when every requirement is met."""
    out: list[Finding] = []
    for dep, needs in sorted(unmet.items()):
        if dep in reported:
            continue
        first = needs[0].split(" requires ", 1)[1]
        out.append(
            Finding(
                f"requirement {dep}",
                "FAIL",
                f"{_installed_as(probe, dep)}; {', '.join(needs)}",
                _repair(ctx)
                if ctx.lock
                else f"{shlex.quote(ctx.python or 'python')} -m pip install {shlex.quote(first)}",
            )
        )
    if not unmet:
        count = len(installed(probe))
        out.append(
            Finding("requirements", "PASS", f"every Requires-Dist of {count} distributions met")
        )
    return out


def check_records(probe: ProbeDoc, ctx: Context) -> list[Finding]:
    """--deep: files changed since install (RECORD hashes)."""
    out: list[Finding] = []
    for name, dist in sorted(installed(probe).items()):
        count = int(dist.get("changed_count") or 0)
        if not count:
            continue
        files = ", ".join(
            f"{c.get('path')} ({c.get('problem')})" for c in dist.get("changed_files", [])[:3]
        )
        python = shlex.quote(ctx.python or "python")
        again = f"{name}=={dist.get('version')}"
        ways = [
            Way(
                f"{name} installed again",
                (run(f"{python} -m pip install --force-reinstall --no-deps {shlex.quote(again)}"),),
            )
        ]
        if ctx.lock_dir:
            ways.append(Way(WHOLE, (run(_repair(ctx)),)))
        out.append(
            choice(
                f"files of {name}",
                "FAIL",
                f"{count} file(s) of {name} {dist.get('version')} differ from its RECORD: {files}",
                ways,
            )
        )
    if not out and "distributions" in probe:
        out.append(Finding("files", "PASS", "every installed file matches its RECORD hash"))
    return out


def check_tensorflow(probe: ProbeDoc, ctx: Context) -> list[Finding]:
    tf = probe.get("tensorflow")
    if tf is None:
        return []
    exp = ctx.expected
    if not tf.get("imported"):
        err: ErrorText | dict[str, str] = tf.get("error") or {}
        message = str(err.get("message", "")).strip().splitlines()
        return [
            Finding(
                "tensorflow import",
                "FAIL",
                f"import tensorflow fails: {err.get('type')}: {message[-1] if message else ''}",
                _repair(ctx)
                if ctx.lock_dir
                else "save the whole error to a file and run envlock doctor --log FILE on it",
                manual=not ctx.lock_dir,
            )
        ]
    out: list[Finding] = []
    version = str(tf.get("version"))
    if exp is not None and ctx.lock is not None and _version(version) != _version(exp.version):
        drift = Finding(
            "tensorflow version",
            "FAIL",
            f"tensorflow {version} imports; the lock has {exp.version}",
            _repair(ctx),
        )
        keras = keras_jump(exp.version, version, ctx)
        if keras is not None and len(keras.ways) > 1:  # back to the lock, or stay: one choice
            drift = choice(drift.check, drift.status, drift.cause, keras.ways)
        out.append(drift)
        if keras is not None:
            out.append(keras)
    else:
        out.append(Finding("tensorflow version", "PASS", f"tensorflow {version} imports"))
    info = tf.get("build_info") or {}
    if not info.get("is_cuda_build", False):
        out.append(
            Finding(
                "tensorflow build",
                "WARN" if ctx.allow_cpu else "FAIL",
                f"tensorflow {version} is a CPU-only build (build_info is_cuda_build is false)",
                "install the CUDA build (tensorflow, or tensorflow[and-cuda] for pip CUDA)",
                manual=True,
            )
        )
    elif exp is not None:
        built = [
            ("CUDA", str(info.get("cuda_version", "")), exp.cuda),
            ("cuDNN", str(info.get("cudnn_version", "")), exp.cudnn),
        ]
        for what, got, want in built:
            n = min(len(got.split(".")), len(want.split(".")), 2)
            if got.split(".")[:n] == want.split(".")[:n]:
                out.append(Finding(f"tensorflow {what}", "PASS", f"built with {what} {got}"))
            else:
                out.append(
                    Finding(
                        f"tensorflow {what}",
                        "FAIL",
                        f"tensorflow was built with {what} {got}; the lock expects {want}",
                        _repair(ctx),
                        manual=not ctx.lock_dir,
                    )
                )
    return out


# TensorFlow 2.16 made Keras 3 its tf.keras; tf-keras (Keras 2) comes back with
# TF_USE_LEGACY_KERAS=1, from tf-keras 2.16 on, one release per TensorFlow minor
# (https://keras.io/getting_started/#tensorflow--keras-2-backwards-compatibility,
# TensorFlow 2.16 release notes).
KERAS_3_FROM = Version("2.16")


def keras_jump(locked: str, installed: str, ctx: Context) -> Finding | None:
    """A TensorFlow change across 2.16 changes what tf.keras is: Keras 2 code breaks
    under Keras 3 (and the other way round)."""
    old, new = _version(locked), _version(installed)
    if old is None or new is None or (old >= KERAS_3_FROM) == (new >= KERAS_3_FROM):
        return None
    if new >= KERAS_3_FROM:
        series = f"{new.major}.{new.minor}"
        python = shlex.quote(ctx.python or "python")
        ways = [
            Way(f"back to tensorflow {locked}, the lock's", (run(_repair(ctx)),)),
            Way(
                f"stay on tensorflow {installed} with Keras 2 (tf-keras; TensorFlow reads "
                "TF_USE_LEGACY_KERAS=1 when it is imported, so set it where the program starts)",
                (
                    run(f"{python} -m pip install 'tf-keras~={series}.0'"),
                    run("export TF_USE_LEGACY_KERAS=1"),
                ),
            ),
        ]
        return choice(
            "keras",
            "WARN",
            f"tensorflow {installed} makes tf.keras Keras 3; the lock's {locked} used Keras 2, "
            "so tf.keras code written for it may break (changed saving formats, optimizers, "
            "layers)",
            ways if ctx.lock_dir else ways[1:],
        )
    return Finding(
        "keras",
        "WARN",
        f"tensorflow {installed} has Keras 2 as tf.keras; the lock's {locked} used Keras 3, "
        "so code written for Keras 3 may break",
        _repair(ctx),
        manual=not ctx.lock_dir,
    )


def _with_requirements(finding: Finding, needs: list[str]) -> Finding:
    """A package row with what the other installed distributions require of it."""
    if not needs:
        return finding
    return dataclasses.replace(finding, cause=f"{finding.cause}; {', '.join(needs)}")


def judge(probe: ProbeDoc, ctx: Context) -> list[Finding]:
    """Every finding for one probe result, in a stable order, root causes first: when
    the interpreter is not the locked Python, the per-package rows it causes are
    folded under the Python finding."""
    findings: list[Finding] = []
    python = check_python(probe, ctx)
    unmet = unmet_requirements(probe)
    have = installed(probe)
    lock_findings = [  # a package installed at another version: what others require of it
        _with_requirements(f, unmet.get(f.check.split(" ", 1)[1], []))
        if f.check.startswith("package ") and f.check.split(" ", 1)[1] in have
        else f
        for f in check_packages(probe, ctx)
    ]
    reported = {f.check.split(" ", 1)[1] for f in lock_findings if f.check.startswith("package ")}
    requirement_findings = check_requirements(probe, ctx, unmet, reported)
    freeze = probe.get("freeze")
    if freeze:  # a package list: no Requires-Dist to check, its roots fold (doctor.roots)
        requirement_findings = [
            Finding("requirements", "INFO", f"not checked: {freeze} carries no Requires-Dist")
        ]
    if python[0].status == "FAIL" and not freeze:
        caused = [f for f in (*lock_findings, *requirement_findings) if f.status != "PASS"]
        head = python[0]
        if caused:
            head = dataclasses.replace(
                head,
                cause=head.cause + f"; {len(caused)} package findings follow from it",
                folded=tuple(caused),
            )
        findings.append(head)
        findings += [f for f in lock_findings if f.status == "WARN"]  # extras: not caused
    else:
        findings += python
        findings += lock_findings
        findings += requirement_findings
    if any("changed_count" in d for d in probe.get("distributions") or []):
        findings += check_records(probe, ctx)
    findings += check_tensorflow(probe, ctx)
    from envlock.doctor.builds import check_framework_builds

    findings += check_framework_builds(probe, ctx)
    if ctx.rehearsed and ctx.host is not None and not freeze:
        gpus = ", ".join(f"{g.name} ({g.compute_capability})" for g in ctx.host.gpus) or "none"
        findings.append(
            Finding(
                "rehearsal",
                "INFO",
                f"judged as if the host had driver {ctx.host.driver} and GPUs {gpus} "
                f"({shlex.join(ctx.rehearsed)}); what TensorFlow listed at run time is this "
                "machine's and is not judged",
            )
        )
    if freeze and ctx.host is None:
        findings.append(
            Finding(
                "driver",
                "INFO",
                "not judged: give the platform's driver with --driver VERSION "
                "(nvidia-smi on it prints it)",
            )
        )
    else:
        findings += check_driver(ctx)
    findings += check_cuda_packages(probe, ctx)
    if not freeze or (ctx.host is not None and ctx.host.gpus):
        findings += check_gpus(probe, ctx)
    findings += check_paths(ctx)
    findings += check_libraries(probe, ctx)
    return findings
