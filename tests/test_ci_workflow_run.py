"""The workflow `envlock ci init` writes, run step by step on this machine.

A repository is made as a maintainer makes it: envlock's wheel built from this
checkout (``uv build --wheel``), ``envlock ci lock`` of one cell committed in
``cells/``, ``envlock ci init`` (envlock's closure locked from the real index
through the user's configuration). Then the generated YAML is read and each job
runs as a runner would: a fresh copy of the repository stands for
``actions/checkout``, a fresh venv on PATH for ``actions/setup-python``, and the
shell of every ``run:`` step runs with ``bash -e`` and the GitHub variables set
(GITHUB_WORKSPACE, GITHUB_EVENT_NAME, GITHUB_REF, GITHUB_OUTPUT,
GITHUB_STEP_SUMMARY, RUNNER_TEMP, the job's env with the matrix values and the
signing key as the secret). The other ``uses:`` steps are done by the test as
the action would: artifacts copied out and back in, the login skipped (the
local registry needs none).

What stands in for what: the local registry 127.0.0.1:5000 for ghcr.io
(ENVLOCK_REGISTRY, the workflow's one registry value); the wheels of envlock's
closure served from a folder by ``python -m http.server`` on 127.0.0.1 for the
runner's index; the cell is TensorFlow 2.15.1 as a tiny wheel whose module is
the fake TensorFlow the ci build tests use (tests/test_ci_build.py), served by
the local fake index and built on the local base image (``--base-image``,
``--build-network host``: this Docker Engine has no default bridge); no GPU
here, so the build job's smoke passes as WARNED with ``--allow-cpu``, added to
its ``ci build`` line (the only edit; it is asserted to be that edit).

Two events are run: a pull request (gate: ``ci lock --check`` passes on the
committed cells; try: build and smoke without push) and a push to the default
branch (gate; build: build, smoke, push, sign, attach; report: one page over
all cells, ``verify --from-registry --require-pass`` of each pushed digest into
the step summary).

Marked slow (about 2 minutes here: envlock's closure installed into a venv, two
image builds), docker (builds, registry) and network (envlock's wheel is built
and its closure locked and downloaded from the real index).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.index.fakeindex import FakeIndex, make_dist
from report_support import make_keys
from test_ci_build import FAKE_TF
from venv_support import seeded_venv

from envlock.ci.actions import load_actions, unpinned, uses_lines

pytestmark = [pytest.mark.docker, pytest.mark.network, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
REGISTRY = "127.0.0.1:5000"
OWNER_REPO = "Envlock-Tests/e2e-" + str(os.getpid())
SPEC = "tensorflow==2.15.1"
CELL = "tf2.15.1-py3.11-cuda12.2"
EXPR = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")


def run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False, **kw)


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def wheel_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A folder served by http.server on 127.0.0.1: <project>/<file> is a simple index."""
    root = tmp_path_factory.mktemp("wheel-index")
    server = ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: _Quiet(*a, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Runner:
    """What the jobs share: the committed repository, artifacts, the registry."""

    repo: Path
    work: Path
    env: dict[str, str]
    key_pem: str
    artifacts: dict[str, Path] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def expr(self, text: str, ctx: dict[str, Any]) -> str:
        """The few expressions the workflow's env, with and names use, evaluated."""

        def one(m: re.Match[str]) -> str:
            name = m.group(1)
            if name.startswith("matrix."):
                return str(ctx["matrix"][name.removeprefix("matrix.")])
            if name.startswith("env."):
                return ctx["env"][name.removeprefix("env.")]
            if name == "secrets.ENVLOCK_SIGNING_KEY":
                return self.key_pem
            if name == "secrets.GITHUB_TOKEN":
                return "unused-by-the-local-registry"
            if name == "github.actor":
                return "envlock-tests"
            raise AssertionError(f"an expression the test does not evaluate: {name}")

        return EXPR.sub(one, text)

    def job(
        self,
        name: str,
        spec: dict[str, Any],
        workflow_env: dict[str, str],
        event: str,
        matrix: dict[str, Any] | None = None,
        edit: Callable[[str], str] | None = None,
        failing: tuple[str, ...] = (),
    ) -> tuple[dict[str, str], str]:
        """Run one job's steps in order; return its outputs and step summary. ``failing``:
        the names of the steps that must fail (the later steps run only if always())."""
        label = f"{name}[{matrix['id']}]" if matrix else name
        base = self.work / event / label
        workspace, temp = base / "workspace", base / "temp"
        temp.mkdir(parents=True)
        env = dict(self.env)
        env.update(workflow_env)
        env.update(
            GITHUB_WORKSPACE=str(workspace),
            GITHUB_EVENT_NAME=event,
            GITHUB_REF="refs/pull/7/merge" if event == "pull_request" else "refs/heads/main",
            GITHUB_REF_NAME="7/merge" if event == "pull_request" else "main",
            GITHUB_REPOSITORY=OWNER_REPO,
            GITHUB_STEP_SUMMARY=str(base / "summary.md"),
            RUNNER_TEMP=str(temp),
        )
        ctx: dict[str, Any] = {"matrix": matrix or {}, "env": env}
        for key, value in (spec.get("env") or {}).items():
            env[key] = self.expr(str(value), ctx)
        outputs: dict[str, str] = {}
        failed = False
        for i, step in enumerate(spec["steps"]):
            if failed and "always()" not in str(step.get("if", "")):
                continue
            uses = step.get("uses")
            if uses is not None:
                self._action(uses.partition("@")[0], step.get("with") or {}, workspace, ctx)
                continue
            output_file = temp / f"output-{i}"
            output_file.touch()
            step_env = dict(env, GITHUB_OUTPUT=str(output_file))
            for key, value in (step.get("env") or {}).items():
                step_env[key] = self.expr(str(value), ctx)
            script = step["run"] if edit is None else edit(step["run"])
            assert "${{" not in script
            started = time.perf_counter()
            proc = run(
                ["bash", "--noprofile", "--norc", "-e", "-c", script],
                cwd=workspace,
                env=step_env,
            )
            self.log.append(
                f"{label}: {step.get('name', script[:40])!r} exit {proc.returncode} "
                f"({time.perf_counter() - started:.1f} s)"
            )
            if step.get("name") in failing:
                assert proc.returncode == 1, proc.stdout + proc.stderr
                failed = True
                continue
            assert proc.returncode == 0, (
                f"{label}: step {step.get('name')!r} failed:\n{proc.stdout}\n{proc.stderr}"
            )
            for line in output_file.read_text().splitlines():
                key, _, value = line.partition("=")
                if "id" in step:
                    outputs[f"{step['id']}.{key}"] = value
        summary = base / "summary.md"
        return outputs, summary.read_text() if summary.exists() else ""

    def _action(self, action: str, with_: dict[str, Any], workspace: Path, ctx: Any) -> None:
        if action == "actions/checkout":
            assert with_.get("persist-credentials") is False
            shutil.copytree(self.repo, workspace)
        elif action == "actions/setup-python":
            assert str(with_["python-version"]) == "3.11"  # the venv below is this Python
        elif action == "docker/login-action":
            assert self.expr(str(with_["registry"]), ctx) == REGISTRY  # no login needed there
        elif action == "actions/upload-artifact":
            name = self.expr(str(with_["name"]), ctx)
            stored = self.work / "artifacts" / name
            paths = [p.strip() for p in self.expr(str(with_["path"]), ctx).splitlines()]
            paths = [p for p in paths if p]
            for path in paths:
                source = workspace / path
                assert source.is_dir(), f"{name}: {path} is no folder"
                target = stored if len(paths) == 1 else stored / path
                shutil.copytree(source, target, dirs_exist_ok=True)
            self.artifacts[name] = stored
        elif action == "actions/download-artifact":
            pattern = re.compile(str(with_["pattern"]).replace("*", ".*"))
            for name, stored in self.artifacts.items():
                if pattern.fullmatch(name):
                    shutil.copytree(stored, workspace / str(with_["path"]) / name)
        else:
            raise AssertionError(f"an action the test cannot stand in for: {action}")


def test_the_generated_workflow_runs_as_written(
    tmp_path: Path,
    make_index: Callable[..., FakeIndex],
    wheel_server: tuple[Path, str],
    base_image: str,
) -> None:
    started = time.perf_counter()
    envlock = str(VENV_BIN / "envlock")
    base_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "RUNNER_", "PIP_", "ENVLOCK_", "VIRTUAL_ENV"))
    }
    base_env["UV_CACHE_DIR"] = str(tmp_path / "uv-cache")
    base_env["SOURCE_DATE_EPOCH"] = "1700000000"

    # ---------------------------------------------------------------- the maintainer
    tf_index = make_index()
    tf_index.add(
        make_dist("tensorflow", "2.15.1", tag="cp311-cp311-manylinux_2_17_x86_64", init=FAKE_TF)
    )
    repo = tmp_path / "repo"
    repo.mkdir()
    built = run(
        [str(VENV_BIN / "uv"), "build", "--wheel", "-o", str(tmp_path / "dist"), str(ROOT)],
        env=dict(base_env, UV_SYSTEM_CERTS="1"),
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("envlock_gpu-*.whl")
    private, public = make_keys(tmp_path)
    locked = run(
        [envlock, "ci", "lock", SPEC, "--python", "3.11", "-o", "cells"]
        + ["--index-url", tf_index.url, "--base-image", base_image, "--python-from", "image"],
        cwd=repo,
        env=base_env,
    )
    assert locked.returncode == 0, locked.stdout + locked.stderr
    init = run(
        [envlock, "ci", "init", "--spec", SPEC, "--runner-label", "gpu-h200"]
        + ["--envlock-wheel", str(wheel), "--public-key", str(public)]
        + ["--build-arg", f"PIP_INDEX_URL={tf_index.url}", "--build-network", "host"],
        cwd=repo,
        env=base_env,
    )
    assert init.returncode == 0, init.stdout + init.stderr
    workflow_path = repo / ".github" / "workflows" / "envlock-images.yml"
    text = workflow_path.read_text()
    assert unpinned(text, load_actions()) == [] and len(uses_lines(text)) >= 10
    workflow = yaml.safe_load(text)

    # the runner's index: envlock's closure, fetched once as pip would, served locally
    served, served_url = wheel_server
    requirements = repo / ".github" / "envlock" / "requirements.txt"
    fetched = run(
        [sys.executable, "-m", "pip", "download", "-q", "--require-hashes", "--no-deps"]
        + ["-r", str(requirements), "-d", str(tmp_path / "wheels")],
        cwd=repo,
    )
    assert fetched.returncode == 0, fetched.stderr
    for path in (tmp_path / "wheels").glob("*.whl"):
        project = re.sub(r"[-_.]+", "-", path.name.split("-")[0]).lower()
        (served / project).mkdir(exist_ok=True)
        shutil.copy(path, served / project / path.name)

    # ---------------------------------------------------------------- the runner
    venv = tmp_path / "runner-python"
    seeded_venv(venv)  # as python -m venv makes it (its pip), in less time
    runner_env = dict(
        base_env,
        PATH=f"{venv / 'bin'}:{base_env['PATH']}",
        PIP_CONFIG_FILE=os.devnull,
        PIP_INDEX_URL=served_url + "",
        PIP_NO_CACHE_DIR="1",
    )
    runner = Runner(repo, tmp_path / "jobs", runner_env, private.read_text())
    workflow_env = {k: str(v) for k, v in workflow["env"].items()}
    assert workflow_env["ENVLOCK_REGISTRY"] == "ghcr.io"
    workflow_env["ENVLOCK_REGISTRY"] = REGISTRY  # the local registry stands in for ghcr.io
    jobs = workflow["jobs"]

    # a pull request: the gate, then each cell built and smoke-tested, nothing pushed
    assert jobs["try"]["if"] == "github.event_name == 'pull_request'"
    outputs, _ = runner.job("gate", jobs["gate"], workflow_env, "pull_request")
    matrix = json.loads(outputs["cells.cells"])
    assert [c["id"] for c in matrix["include"]] == [CELL]
    for cell in matrix["include"]:
        runner.job("try", jobs["try"], workflow_env, "pull_request", cell)
    tried = json.loads((runner.artifacts[f"envlock-try-{CELL}"] / "summary.json").read_text())
    assert [(c["cell"], c["ok"], c["pinned"]) for c in tried["cells"]] == [(CELL, True, None)]

    # a push to the default branch: gate, build (smoke, push, sign, attach), report
    assert "default_branch" in jobs["build"]["if"] and "!= 'pull_request'" in jobs["build"]["if"]
    outputs, _ = runner.job("gate", jobs["gate"], workflow_env, "push")

    def allow_cpu(script: str) -> str:  # no GPU on this machine: the one edit
        if "envlock ci build" not in script:
            return script
        assert "--allow-cpu" not in script
        return script.replace("envlock ci build ", "envlock ci build --allow-cpu ", 1)

    for cell in json.loads(outputs["cells.cells"])["include"]:
        runner.job("build", jobs["build"], workflow_env, "push", cell, edit=allow_cpu)
    built_summary = json.loads(
        (runner.artifacts[f"envlock-cell-{CELL}"] / "summary.json").read_text()
    )
    (outcome,) = built_summary["cells"]
    assert outcome["ok"] and outcome["smoke"] == "WARNED", outcome
    repository = f"{REGISTRY}/{OWNER_REPO.lower()}"
    assert re.fullmatch(re.escape(repository) + r"@sha256:[0-9a-f]{64}", outcome["pinned"])
    assert outcome["attached"], outcome
    assert (runner.artifacts[f"envlock-cell-{CELL}"] / CELL / "report.intoto.json").is_file()

    assert jobs["report"]["needs"] == "build"
    _, summary = runner.job("report", jobs["report"], workflow_env, "push")
    assert f"| {CELL} | `{outcome['pinned']}` | verified |" in summary
    page = runner.artifacts["envlock-report-page"] / "report-page" / "index.html"
    assert CELL in page.read_text() or outcome["pinned"].split("@")[1] in page.read_text()
    assert "verify" in summary and "| --- |" in summary

    # the gate gates: the same reports against another trusted key fail the report job
    _, other = make_keys(tmp_path, "other")
    shutil.copy(other, repo / ".github" / "envlock" / "signing.pub.pem")
    steps = (
        "one report page over all cells",  # the page is written, the report listed unverified
        "verify every pushed digest (its attached report must verify and pass)",
    )
    runner.work = tmp_path / "jobs-other-key"
    _, summary = runner.job("report", jobs["report"], workflow_env, "push", failing=steps)
    assert f"| {CELL} | `{outcome['pinned']}` | FAILED |" in summary
    print("\n".join(runner.log), f"\nwhole run {time.perf_counter() - started:.1f} s")
