"""envlock ci build: every cell of a folder built, pushed, smoke-tested and signed.

The cells are small bundles over the local base image: a fake TensorFlow module
(enough of its API for the harness: version, build info, no GPU, a matmul) so
the smoke run passes as WARNED with --allow-cpu, and a pylock.toml the report
pins. One cell fails on purpose (a RUN step that exits 1). Pushes go to the
real registry on 127.0.0.1:5000 (tests/docker/setup.sh).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_support import build_test_image, remove_repository
from report_support import make_keys

from envlock.ci.build import (
    build_cells,
    cell_ref,
    check_repository,
    find_cells,
)
from envlock.ci.options import CiBuildOptions
from envlock.ci.progress import PlainProgress
from envlock.ci.summary import CellOutcome
from envlock.cli import main
from envlock.errors import UsageError

REGISTRY = "127.0.0.1:5000"
REPO = f"{REGISTRY}/envlock-push-ci"
DEAD_SOCKET = "unix:///nonexistent/envlock-test-docker.sock"
SITE = "/usr/lib/python3/dist-packages/tensorflow/__init__.py"
FIXTURE_LOCK = Path(__file__).parent / "fixtures" / "old-bundles" / "v1-lock"

FAKE_TF = """
import contextlib
__version__ = "2.15.1"
float32 = float16 = bfloat16 = "dtype"
class _T:
    device = "/job:localhost/replica:0/task:0/device:CPU:0"
    def __getitem__(self, index):
        return self
    def __add__(self, other):
        return self
    __sub__ = __add__
    def numpy(self):
        return _N(0.0)
class _N(float):
    def __getitem__(self, index):
        return self
def device(name):
    return contextlib.nullcontext()
def cast(value, dtype):
    return _T()
def matmul(a, b):
    return _T()
def tanh(x):
    return x
def reduce_mean(x, **kwargs):
    return x
def reduce_max(x, **kwargs):
    return x
abs = tanh
def function(f, jit_compile=False):
    return f
class random:
    @staticmethod
    def normal(shape, **kwargs):
        return _T()
    @staticmethod
    def stateless_uniform(shape, **kwargs):
        return _T()
class sysconfig:
    @staticmethod
    def get_build_info():
        return {"cuda_version": "12.2", "cudnn_version": "8", "is_cuda_build": True}
class _Experimental:
    @staticmethod
    def set_memory_growth(device, enabled):
        pass
    @staticmethod
    def tensor_float_32_execution_enabled():
        return True
class config:
    experimental = _Experimental
    @staticmethod
    def list_physical_devices(kind):
        return []
"""


def make_cell(root: Path, name: str, base_image: str, *, fail: bool = False) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    run = "RUN echo this cell fails on purpose && exit 1\n" if fail else ""
    (folder / "Dockerfile").write_text(
        f"ARG BASE_IMAGE={base_image}\n"
        "FROM ${BASE_IMAGE}\n"
        f"COPY tf.py {SITE}\n"
        f"{run}"
        f'LABEL io.envlock.framework="tensorflow" io.envlock.cell="{name}"\n'
    )
    (folder / "tf.py").write_text(FAKE_TF)
    (folder / "pylock.toml").write_text(f'lock-version = "1.0"\n# cell {name}\n')
    return folder


@pytest.fixture(autouse=True)
def reproducible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_SHA"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def docker_client() -> Iterator[Any]:
    import docker

    client = docker.from_env(timeout=300)
    yield client
    client.close()


# ---------------------------------------------------------------- no engine needed


def test_cells_are_the_subfolders_with_a_dockerfile(tmp_path: Path) -> None:
    (tmp_path / "b-cell").mkdir()
    (tmp_path / "b-cell" / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / "a.cell_1").mkdir()
    (tmp_path / "a.cell_1" / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / "notes").mkdir()
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")  # DIR itself is no cell
    (tmp_path / "summary.json").write_text("{}")
    assert [c for c, _ in find_cells(tmp_path)] == ["a.cell_1", "b-cell"]
    assert str(cell_ref(None, "a.cell_1")) == "envlock-ci:a.cell_1"
    pushed = cell_ref(check_repository("127.0.0.1:5000/t/tf"), "b-cell")
    assert str(pushed) == "127.0.0.1:5000/t/tf:b-cell"
    assert (pushed.registry, pushed.path, pushed.tag) == ("127.0.0.1:5000", "t/tf", "b-cell")


def test_repository_checks() -> None:
    ref = check_repository("ghcr.io/owner/tf")
    assert (ref.repository, ref.registry, ref.tag, ref.digest) == (
        "ghcr.io/owner/tf",
        "ghcr.io",
        None,
        None,
    )
    for bad in ("owner/tf", "ghcr.io/owner/tf:1", "Not A Repo", f"ghcr.io/o/tf@sha256:{'a' * 64}"):
        with pytest.raises(UsageError):
            check_repository(bad)


def _cells(tmp_path: Path, names: tuple[str, ...] = ("one",)) -> Path:
    root = tmp_path / "cells"
    for name in names:
        make_cell(root, name, "envlock-test/bookworm-python:1")
    return root


@pytest.mark.parametrize(
    ("setup", "extra", "words"),
    [
        ("empty", [], "no cells (no subfolder with a Dockerfile)"),
        ("missing", [], "no such folder"),
        ("cells", ["--push", "owner/tf"], "give a repository with its registry host"),
        ("cells", ["--push", f"{REGISTRY}/x:1"], "and no tag"),
        ("cells", ["--build-arg", "NOPE"], "expected NAME=VALUE"),
        ("cells", ["--build-arg", "HTTP_PROXY=x"], "declares no such build argument"),
        (
            "cells",
            ["--build-arg", "BASE_IMAGE=https://u:p@example.invalid/x"],
            "URL with credentials",
        ),
        ("cells", ["--jobs", "0"], "--jobs 0: must be at least 1"),
        ("cells", ["--sign", "/nonexistent/key.pem"], "/nonexistent/key.pem"),
        ("badname", [], "cannot be an image tag"),
    ],
)
def test_bad_input_exits_2_before_the_engine(
    tmp_path: Path,
    setup: str,
    extra: list[str],
    words: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DOCKER_HOST", DEAD_SOCKET)  # never reached
    root = tmp_path / "cells"
    if setup == "empty":
        root.mkdir()
        (root / "notes").mkdir()
    elif setup == "cells":
        root = _cells(tmp_path)
    elif setup == "badname":
        make_cell(root, "bad name", "envlock-test/bookworm-python:1")
    assert main(["ci", "build", str(root), *extra]) == 2
    err = capsys.readouterr().err
    assert words in err
    assert "Traceback" not in err
    assert not (root / "summary.json").exists()


def test_no_engine_is_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DOCKER_HOST", DEAD_SOCKET)
    root = _cells(tmp_path)
    assert main(["ci", "build", str(root)]) == 3
    err = capsys.readouterr().err
    assert f"cannot reach the Docker Engine at {DEAD_SOCKET}" in err
    assert not (root / "summary.json").exists()


# ---------------------------------------------------------------- the engine and the registry


@pytest.mark.docker
def test_two_cells_one_fails_pushed_smoked_signed_and_pulled_back_by_digest(
    tmp_path: Path,
    base_image: str,
    docker_client: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from envlock.image import ref as imageref

    parsed: list[str] = []  # every text parsed as an image reference (parse goes through match)
    real_match = imageref.match

    def counting_match(value: str) -> imageref.ImageRef | None:
        parsed.append(value)
        return real_match(value)

    monkeypatch.setattr(imageref, "match", counting_match)
    root = tmp_path / "cells"
    good = make_cell(root, f"good-{time.time_ns()}", base_image)
    make_cell(root, "broken", base_image, fail=True)
    priv, pub = make_keys(tmp_path)
    good_tag = f"{REPO}:{good.name}"
    try:
        code = main(
            ["ci", "build", str(root), "--jobs", "2", "--push", REPO, "--sign", str(priv)]
            + ["--allow-cpu", "--network", "none"]
        )
        captured = capsys.readouterr()
        assert code == 1, captured.err
        # --push is parsed once; the cell's tag, its pushed digest, the smoke run, the
        # report and the registry are handed that ImageRef; the pinned reference is
        # parsed once more where the report page reads it back from summary.json
        ours = [v for v in parsed if v.startswith(REPO)]
        assert ours.count(REPO) == 1 and len(ours) == 2, ours
        assert ours[1].startswith(f"{REPO}@sha256:"), ours

        # the summary on disk
        summary = json.loads((root / "summary.json").read_text())
        assert summary["schema"] == "envlock.ci-build/v1"
        assert summary["repository"] == REPO and summary["jobs"] == 2
        assert summary["ok"] is False and summary["failed"] == ["broken"]
        cells = {c["cell"]: c for c in summary["cells"]}
        assert list(cells) == ["broken", good.name]
        bad, ok = cells["broken"], cells[good.name]
        assert bad["ok"] is False and bad["stage"] == "failed" and bad["build"] == "failed"
        assert bad["reason"] == (
            "build: step 4/7 RUN echo this cell fails on purpose &...: exit code 1"
        )
        assert bad["error"].startswith("the build failed at step 4/7 (RUN echo this cell")
        assert "  | this cell fails on purpose" in bad["error"]
        assert bad["digest"] is None and bad["smoke"] is None and bad["report"] is None
        assert ok["ok"] is True and ok["stage"] == "done" and ok["build"] in ("ok", "cached")
        assert ok["tag"] == good_tag
        digest = ok["digest"]
        assert digest.startswith("sha256:") and ok["pinned"] == f"{REPO}@{digest}"
        assert ok["smoke"] == "WARNED" and ok["reason"] is None and ok["error"] is None
        assert ok["report"] == f"{good.name}/report.intoto.json"
        assert (good / "report.intoto.json").is_file() and (good / "smoke.json").is_file()
        assert not (root / "broken" / "report.intoto.json").exists()

        # the summary table on stdout, plain progress lines on stderr
        out = captured.out.splitlines()
        assert out[0].split() == [
            "cell", "build", "push", "digest", "smoke", "report", "seconds", "reason",
        ]  # fmt: skip
        assert out[2].split()[:5] == ["broken", "failed", "-", "-", "-"]
        assert out[2].endswith(bad["reason"])
        assert out[3].startswith(good.name) and digest[:19] in out[3] and "WARNED" in out[3]
        assert "2 cells, 1 ok, 1 failed" in captured.out
        assert f"pushed {REPO}@{digest}" in captured.out
        err = captured.err
        assert f"[{good.name}] build step 1/" in err
        assert f"[{good.name}] pushed {REPO}@{digest}" in err
        assert f"[{good.name}] smoke WARNED" in err
        assert f"[{good.name}] smoke log: {good.name}/smoke.log" in err
        assert "envlock-smoke: PASS import" in (good / "smoke.log").read_text()
        assert "envlock-smoke:" not in err  # the harness's lines stay in the cell's log
        assert f"[{good.name}] signed {good.name}/report.intoto.json" in err
        assert f"[broken] FAILED: {bad['reason']}" in err
        assert "[broken] build step 4/7 RUN echo this cell fails on purpose && exit 1\n" in err

        # removed here, pulled back by digest: the same image, and the report verifies
        image_id = ok["image_id"]
        docker_client.images.remove(good_tag)
        with pytest.raises(Exception):  # noqa: B017, PT011 - docker's ImageNotFound
            docker_client.images.get(image_id)
        pulled = docker_client.images.pull(f"{REPO}@{digest}")
        assert pulled.id == image_id
        code = main(
            ["verify", str(good / "report.intoto.json"), "--key", str(pub)]
            + ["--image", f"{REPO}@{digest}", "--lock", str(good)]
        )
        verdict = capsys.readouterr()
        assert code == 0, verdict.err

        # the report names the pushed manifest, and the registry holds it as cosign lays it out
        from envlock.image import referrers
        from envlock.report import dsse

        report = (good / "report.intoto.json").read_bytes()
        doc = json.loads(dsse.parse_envelope(report).payload)
        assert doc["subject"] == [{"name": REPO, "digest": {"sha256": digest[7:]}}]
        assert doc["predicate"]["envlock"]["subject_kind"] == "image-manifest"
        # (#28: a Sigstore bundle referring to the image, in the referrers tag index)
        from envlock.report import sigstore

        assert ok["attached"].startswith(f"{REPO}@sha256:")
        assert f"[{good.name}] attached the report as {ok['attached']}" in err
        (bundle,) = [a.data for a in referrers.iter_bundles(f"{REPO}@{digest}")]
        assert bundle is not None
        assert sigstore.parse_bundle(bundle)[0] == dsse.parse_envelope(report)
        assert cells["broken"]["attached"] is None
    finally:
        for ref in (good_tag, f"{REPO}@sha256:x", "envlock-ci:broken"):
            with contextlib.suppress(Exception):
                docker_client.images.remove(ref, force=True)
        remove_repository(docker_client, REPO, keep=base_image)


@pytest.mark.docker
def test_local_tags_without_push_and_a_smoke_failure_without_allow_cpu(
    tmp_path: Path, base_image: str, docker_client: Any
) -> None:
    root = tmp_path / "cells"
    make_cell(root, "cpu-only", base_image)
    lines: list[str] = []
    outcomes: list[CellOutcome] = []
    try:
        summary = build_cells(
            root,
            CiBuildOptions(network="none"),
            progress=PlainProgress(lines.append),
            outcomes=outcomes,
        )
        assert not summary.ok
        (cell,) = summary.cells
        assert outcomes == [cell]
        assert cell.tag == "envlock-ci:cpu-only" and cell.digest is None
        assert cell.build in ("ok", "cached") and cell.smoke == "FAILED"
        assert cell.reason is not None and cell.reason.startswith("smoke FAILED: ")
        assert "[cpu-only] smoke FAILED\n" in lines
        assert docker_client.images.get("envlock-ci:cpu-only").id == cell.image_id
        doc = json.loads((root / "summary.json").read_text())
        assert doc["cells"][0]["smoke"] == "FAILED" and doc["cells"][0]["stage"] == "failed"
    finally:
        with contextlib.suppress(Exception):
            docker_client.images.remove("envlock-ci:cpu-only", force=True)


def test_short_reason_reads_the_fields_of_build_failed() -> None:
    """A failed step is summarised from BuildFailed's fields (step, instruction,
    the RUN step's exit code), not from its message parsed again."""
    from envlock.ci.progress import short_reason
    from envlock.image.build import BuildFailed, _step_failure, _StepTracker

    tracker = _StepTracker()
    tracker.feed_text("Step 1/3 : FROM debian:bookworm\n ---> abc\n")
    tracker.feed_text("Step 2/3 : RUN python -m pip install --require-hashes -r requirements.txt\n")
    tracker.flush()
    err = _step_failure(
        tracker,
        "The command '/bin/sh -c python -m pip install' returned a non-zero code: 23",
    )
    assert isinstance(err, BuildFailed) and err.exit_code == 3
    assert (err.step, err.step_exit_code) == ("2/3", 23)
    assert err.instruction == "RUN python -m pip install --require-hashes -r requirements.txt"
    assert short_reason(err) == "step 2/3 RUN python -m pip install --require-h...: exit code 23"
    other = _step_failure(tracker, "no space left on device")
    assert other.step_exit_code is None
    assert short_reason(other).endswith(": no space left on device")
    assert short_reason(RuntimeError("first line\nsecond")) == "first line"


# ---------------------------------------------------------------- order, reuse, cleanup, heartbeat


def make_staged_cell(root: Path, name: str, base_image: str, *, sleep: int = 0) -> Path:
    """A two-stage cell, as envlock's own Dockerfile is: a build stage whose image the
    engine keeps untagged, and the runtime stage copying from it."""
    folder = root / name
    folder.mkdir(parents=True)
    pause = f"sleep {sleep} && " if sleep else ""
    (folder / "Dockerfile").write_text(
        f"ARG BASE_IMAGE={base_image}\n"
        "FROM ${BASE_IMAGE} AS build\n"
        f"RUN {pause}echo installing {name} && echo {name}-{time.time_ns()} > /tmp/marker\n"
        "FROM ${BASE_IMAGE}\n"
        "COPY --from=build /tmp/marker /marker\n"
        f"COPY tf.py {SITE}\n"
        f'LABEL io.envlock.framework="tensorflow" io.envlock.cell="{name}"\n'
    )
    (folder / "tf.py").write_text(FAKE_TF)
    (folder / "pylock.toml").write_text(f'lock-version = "1.0"\n# cell {name}\n')
    return folder


def registry_tags(path: str) -> dict[str, str]:
    """{tag: manifest digest} of a repository of the local registry, as it answers."""
    import requests

    accept = ", ".join(
        [
            "application/vnd.docker.distribution.manifest.v2+json",
            "application/vnd.oci.image.manifest.v1+json",
            "application/vnd.oci.image.index.v1+json",
        ]
    )
    with requests.Session() as s:
        resp = s.get(f"http://{REGISTRY}/v2/{path}/tags/list", timeout=30)
        if resp.status_code == 404:
            return {}
        resp.raise_for_status()
        tags = resp.json().get("tags") or []
        out = {}
        for tag in tags:
            head = s.head(
                f"http://{REGISTRY}/v2/{path}/manifests/{tag}", headers={"Accept": accept}
            )
            out[tag] = head.headers["Docker-Content-Digest"]
        return out


def _lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line]


@pytest.mark.docker
def test_a_rerun_with_nothing_changed_keeps_digests_and_attaches_nothing(
    tmp_path: Path, base_image: str, docker_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from envlock.report import envelope_bytes, sign_envelope

    name = f"staged-{time.time_ns()}"
    path = f"envlock-rerun-{time.time_ns()}"
    repo = f"{REGISTRY}/{path}"
    root = tmp_path / "cells"
    make_staged_cell(root, name, base_image)
    priv, pub = make_keys(tmp_path)
    argv = ["ci", "build", str(root), "--push", repo, "--sign", str(priv), "--allow-cpu"]
    argv += ["--network", "none"]
    try:
        assert main(argv) == 0
        first = capsys.readouterr()
        cell1 = json.loads((root / "summary.json").read_text())["cells"][0]
        digest, image_id = cell1["digest"], cell1["image_id"]
        report1 = (root / name / "report.intoto.json").read_bytes()
        tags1 = registry_tags(path)
        assert tags1[name] == digest and cell1["attached"] is not None
        # the cell's tag and what attaching the report added (however attach lays it out)
        assert len(tags1) >= 2, tags1

        # the order: smoke on the local image, then push; every cell line prefixed
        lines = _lines(first.err)
        smoked = lines.index(f"[{name}] smoke WARNED")
        pushed = lines.index(f"[{name}] pushed {repo}@{digest}")
        assert smoked < pushed
        layers = [x for x in lines[smoked:pushed] if x.startswith(f"[{name}] push ")]
        assert layers, lines  # each layer as it lands (Pushed / Layer already exists)
        assert f"[{name}] smoke started in {image_id[:19]}" in first.err
        outside = [x for x in lines if not x.startswith(f"[{name}] ")]
        assert all(x.startswith("report page: ") for x in outside), outside
        # the smoke result records the image id that ran; it is the pushed config
        smoke = json.loads((root / name / "smoke.json").read_text())
        assert smoke["image"]["id"] == image_id

        # the build stage's image is gone, with its layers; the cell's own image stays
        assert len(cell1["removed"]) == 1 and cell1["removed"][0] != image_id
        with pytest.raises(Exception):  # noqa: B017, PT011 - docker's ImageNotFound
            docker_client.images.get(cell1["removed"][0])
        assert docker_client.images.get(image_id).id == image_id
        assert f"[{name}] removed build-stage image {cell1['removed'][0][:19]}" in first.err

        # the rerun: nothing changed, so nothing is built, signed or attached again
        assert main([*argv, "--summary-format", "markdown"]) == 0
        second = capsys.readouterr()
        assert second.out.startswith("### envlock ci build\n")  # for $GITHUB_STEP_SUMMARY
        assert f"| `{name}` | ok | reused | WARNED | `{repo}@{digest}` |" in second.out
        assert f"\ndocker pull {repo}@{digest}\n" in second.out
        cell2 = json.loads((root / "summary.json").read_text())["cells"][0]
        assert cell2["build"] == "reused"
        assert (cell2["digest"], cell2["image_id"]) == (digest, image_id)
        assert cell2["attached"] == cell1["attached"] and cell2["inputs"] == cell1["inputs"]
        assert (root / name / "report.intoto.json").read_bytes() == report1
        assert registry_tags(path) == tags1
        assert f"[{name}] unchanged since the last run" in second.err
        assert "build step" not in second.err and f"[{name}] signed" not in second.err
        assert f"[{name}] attached" not in second.err

        # the report verifies against the pushed manifest, through `report verify`
        args = ["report", "verify", str(root / name / "report.intoto.json"), "--key", str(pub)]
        assert main([*args, "--image", f"{repo}@{digest}", "--lock", str(root / name)]) == 0
        out = capsys.readouterr().out
        assert f"config of {repo}@{digest} vs the image the smoke test ran ({image_id})" in out
        # a report whose smoke ran another image than the manifest's config: drift
        smoke["image"]["id"] = "sha256:" + "0" * 64
        other = sign_envelope(smoke, priv, lock_dir=root / name, image_id=None,
                              image_ref=f"{repo}@{digest}")  # fmt: skip
        forged = tmp_path / "other.intoto.json"
        forged.write_bytes(envelope_bytes(other.to_dict()))
        assert main(["verify", str(forged), "--key", str(pub), "--image", f"{repo}@{digest}"]) == 1
        verdict = capsys.readouterr()
        assert "predicate.envlock.smoke.image.id" in verdict.out
        assert "VERIFIED" not in verdict.out.replace("NOT VERIFIED", "")

        # the cell's tag moved to another image: not reused, built and pushed back
        from envlock.image.push import push

        # another image than the base (a test must not add references to the shared
        # base image: the cleanup below removes what the repository lists)
        other, _ = build_test_image(
            docker_client,
            fileobj=io.BytesIO(f"FROM {base_image}\nLABEL io.envlock.test=moved\n".encode()),
            rm=True,
            network_mode="none",
        )
        other.tag(repo, name)
        assert push(f"{repo}:{name}").digest != digest
        assert main(argv) == 0
        moved = capsys.readouterr()
        cell_moved = json.loads((root / "summary.json").read_text())["cells"][0]
        assert cell_moved["build"] in ("ok", "cached"), moved.err
        assert f"[{name}] unchanged since the last run" not in moved.err
        assert registry_tags(path)[name] == cell_moved["digest"] == digest  # same image again

        # a changed lock is a new image: built, pushed and signed again
        with (root / name / "pylock.toml").open("a") as f:
            f.write("# changed\n")
        assert main(argv) == 0
        capsys.readouterr()
        cell3 = json.loads((root / "summary.json").read_text())["cells"][0]
        assert cell3["build"] in ("ok", "cached") and cell3["inputs"] != cell1["inputs"]
        assert (root / name / "report.intoto.json").read_bytes() != report1
    finally:
        remove_repository(docker_client, repo, keep=base_image)


@pytest.mark.docker
def test_a_pushed_signed_cell_has_its_sbom_attached_and_named_by_the_report(
    tmp_path: Path, base_image: str, docker_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """#28: beside the image the registry holds the signed report and the signed
    SBOM (the image's lock's closure and its dpkg packages), and the report names
    the SBOM's digest; a rerun with nothing changed keeps both and attaches nothing."""
    from envlock.lock.pylock import read_lock
    from envlock.report import dsse
    from envlock.report import sbom as sbommod

    name = f"sbom-{time.time_ns()}"
    path = f"envlock-sbom-{time.time_ns()}"
    repo = f"{REGISTRY}/{path}"
    root = tmp_path / "cells"
    folder = make_cell(root, name, base_image)
    (folder / "pylock.toml").write_bytes((FIXTURE_LOCK / "pylock.toml").read_bytes())
    # the lock where envlock's Dockerfile puts it: the SBOM's Python part is the image's
    dockerfile = (folder / "Dockerfile").read_text()
    (folder / "Dockerfile").write_text(
        dockerfile.replace("LABEL ", f"COPY pylock.toml {sbommod.IMAGE_LOCK}\nLABEL ", 1)
    )
    priv, pub = make_keys(tmp_path)
    argv = ["ci", "build", str(root), "--push", repo, "--sign", str(priv), "--allow-cpu"]
    argv += ["--network", "none"]
    try:
        assert main(argv) == 0
        first = capsys.readouterr()
        cell = json.loads((root / "summary.json").read_text())["cells"][0]
        pinned = cell["pinned"]
        data = (folder / "sbom.cdx.json").read_bytes()
        doc = json.loads(data)
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        assert data == sbommod.sbom_bytes(doc) and digest == f"sha256:{sbommod.sbom_digest(doc)}"
        assert cell["sbom"] == f"{name}/sbom.cdx.json" and cell["sbom_digest"] == digest
        assert cell["sbom_attached"].startswith(f"{repo}@sha256:")
        assert cell["sbom_attached"] != cell["attached"]
        assert f"[{name}] attached the SBOM as {cell['sbom_attached']}\n" in first.err
        lines = _lines(first.err)
        made = next(i for i, x in enumerate(lines) if x.startswith(f"[{name}] SBOM {name}/"))
        assert lines.index(f"[{name}] pushed {pinned}") < made
        assert made < lines.index(f"[{name}] signed {name}/report.intoto.json")
        # the SBOM is of the image that ran: the lock's packages and the base's dpkg ones
        assert doc["metadata"]["component"]["name"] == pinned
        purls = [c["purl"] for c in doc["components"]]
        locked = read_lock(folder)
        assert len(locked.packages) > 0
        assert sorted(x for x in purls if x.startswith("pkg:pypi/")) == sorted(
            f"pkg:pypi/{p.name}@{p.version}" for p in locked.packages
        )
        assert any(x.startswith("pkg:deb/debian/python3") for x in purls), purls[:20]
        assert any(x.startswith("pkg:deb/debian/dpkg@") for x in purls)

        # verify --from-registry finds both, and the report names the SBOM's digest
        verify = ["verify", "--from-registry", "--image", pinned, "--key", str(pub)]
        assert main([*verify, "--json"]) == 0
        found = json.loads(capsys.readouterr().out)
        assert found["found"] == {
            "test-result": {"referrers tag": 1},
            "sbom": {"referrers tag": 1},
        }
        kinds = {a["kind"]: a for a in found["attestations"]}
        assert len(found["attestations"]) == 2 and set(kinds) == {"test-result", "sbom"}
        report, attested = kinds["test-result"], kinds["sbom"]
        assert report["verified"] is True and attested["verified"] is True
        assert report["sbom"] == {"named": digest, "verified": True}
        assert attested["sbom_digest"] == digest
        assert main([*verify, "--lock", str(folder)]) == 0
        out = capsys.readouterr().out
        assert f"{folder / 'sbom.cdx.json'}: matches the report" in out
        assert f"\nSBOM {digest}, named by this report: attached and verified\n" in out

        # the rerun: the same inputs, the same SBOM, nothing signed or attached again
        tags = registry_tags(path)
        statement = (folder / "sbom.intoto.json").read_bytes()
        assert main(argv) == 0
        second = capsys.readouterr()
        again = json.loads((root / "summary.json").read_text())["cells"][0]
        assert again["build"] == "reused" and again["inputs"] == cell["inputs"]
        for key in ("digest", "attached", "sbom", "sbom_digest", "sbom_attached"):
            assert again[key] == cell[key], key
        assert (folder / "sbom.cdx.json").read_bytes() == data
        assert (folder / "sbom.intoto.json").read_bytes() == statement
        assert registry_tags(path) == tags
        assert "SBOM" not in second.err and f"[{name}] attached" not in second.err
        signed = dsse.parse_envelope((folder / "report.intoto.json").read_bytes()).payload
        assert digest[7:].encode() in signed and b"sbom.cdx.json" in signed

        # a lock no SBOM can be made of: the cell is built and signed, with the reason,
        # and the report names no SBOM (not the one the last run left)
        (folder / "pylock.toml").write_text('lock-version = "1.0"\n# not a whole lock\n')
        assert main(argv) == 0
        third = capsys.readouterr()
        cell3 = json.loads((root / "summary.json").read_text())["cells"][0]
        assert cell3["inputs"] != cell["inputs"] and cell3["build"] in ("ok", "cached")
        assert (cell3["sbom"], cell3["sbom_digest"], cell3["sbom_attached"]) == (None,) * 3
        assert f"[{name}] no SBOM: " in third.err and "pylock.toml" in third.err
        assert not (folder / "sbom.cdx.json").exists()
        assert not (folder / "sbom.intoto.json").exists()
        signed = dsse.parse_envelope((folder / "report.intoto.json").read_bytes()).payload
        assert b"sbom.cdx.json" not in signed
    finally:
        remove_repository(docker_client, repo, keep=base_image)


@pytest.mark.docker
def test_a_failing_smoke_is_never_pushed_and_keep_keeps_the_build_stage(
    tmp_path: Path, base_image: str, docker_client: Any
) -> None:
    name = f"nogpu-{time.time_ns()}"
    path = f"envlock-nopush-{time.time_ns()}"
    root = tmp_path / "cells"
    make_staged_cell(root, name, base_image, sleep=3)
    lines: list[str] = []
    summary = build_cells(
        root,
        CiBuildOptions(push=f"{REGISTRY}/{path}", network="none", keep=True, heartbeat=1.0),
        progress=PlainProgress(lines.append),
    )
    (cell,) = summary.cells
    try:
        assert cell.smoke == "FAILED" and cell.digest is None and cell.pinned is None
        assert registry_tags(path) == {}  # nothing landed under the cell's tag
        assert f"[{name}] not pushed: the smoke test FAILED\n" in lines
        # no GPU here: the engine refuses the GPU request; the note carries the cell
        assert any(x.startswith(f"[{name}] warning: the GPU request failed") for x in lines)
        assert all(x.startswith(f"[{name}] ") for x in lines), lines
        # --keep: the build stage's image is still there
        assert cell.removed == [] and len(cell.stage_images) == 1
        assert docker_client.images.get(cell.stage_images[0]).tags == []
        # the 3 s RUN step was silent: the heartbeat said where the build was
        beats = [x for x in lines if x.startswith(f"[{name}] ... build step ")]
        assert beats and "log lines" in beats[0], lines
    finally:
        with contextlib.suppress(Exception):
            docker_client.images.remove(cell.tag, force=True)
        for short in cell.stage_images:
            with contextlib.suppress(Exception):
                docker_client.images.remove(short)


def test_stage_images_are_read_from_the_classic_builders_log() -> None:
    from envlock.ci.build import stage_images

    log = [
        "Step 1/6 : ARG BASE_IMAGE=x",
        "Step 2/6 : FROM ${BASE_IMAGE} AS build",
        " ---> 1111aaaa2222",
        "Step 3/6 : RUN make",
        " ---> Running in 99990000ffff",
        " ---> Removed intermediate container 99990000ffff",
        " ---> 3333bbbb4444",
        "Step 4/6 : FROM ${BASE_IMAGE}",
        " ---> 1111aaaa2222",
        "Step 5/6 : COPY --from=build /x /x",
        " ---> Using cache",
        " ---> 5555cccc6666",
        "Successfully built 5555cccc6666",
    ]
    assert stage_images(log) == ("3333bbbb4444",)
    assert stage_images(log[3:]) == ()  # one stage: nothing left behind


def test_markdown_summary_escapes_and_names_pull_commands(tmp_path: Path) -> None:
    from envlock.ci.summary import CiBuildSummary, markdown_summary
    from envlock.image.ref import ImageRef

    digest = "sha256:" + "ab" * 32
    ok = CellOutcome("tf2.15", tmp_path, f"{REPO}:tf2.15", stage="done", build="reused")
    ok.pinned, ok.smoke, ok.report, ok.seconds = (
        ImageRef(REPO).at(digest), "PASSED", "tf2.15/report.intoto.json", 1.25,
    )  # fmt: skip
    bad = CellOutcome("tf2.16", tmp_path, f"{REPO}:tf2.16", stage="failed", build="failed")
    bad.reason, bad.image_id = "build: step 3/9 RUN a | b <x> *y*", None
    summary = CiBuildSummary(tmp_path, REPO, (ok, bad), 3.04, 2)
    assert markdown_summary(summary) == (
        "### envlock ci build\n\n"
        "2 cells, 1 ok, 1 failed, 3.0 s (--jobs 2)\n\n"
        "| cell | result | build | smoke | image | report | seconds |\n"
        "| --- | --- | --- | --- | --- | --- | ---: |\n"
        f"| `tf2.15` | ok | reused | PASSED | `{REPO}@{digest}` | `tf2.15/report.intoto.json` "
        "| 1.2 |\n"
        "| `tf2.16` | FAILED: build: step 3/9 RUN a \\| b \\<x\\> \\*y\\* | failed | - | - | - "
        "| 0.0 |\n\n"
        "Pull by digest:\n\n```sh\n"
        f"docker pull {REPO}@{digest}\n```\n"
    )


def test_push_progress_counts_the_bytes_the_engine_reports() -> None:
    from envlock.image.push import PushProgress

    p = PushProgress()
    for chunk in [
        {"status": "Preparing", "id": "a1"},
        {"status": "Preparing", "id": "b2"},
        {"status": "Pushing", "id": "a1", "progressDetail": {"current": 500000, "total": 2000000}},
        {"status": "Layer already exists", "id": "b2"},
        {"status": "Pushing", "id": "a1", "progressDetail": {"current": 1500000, "total": 2000000}},
    ]:
        p.feed(chunk)
    assert p.line() == "1.5 MB sent of 2.0 MB, 1/2 layers done"
    p.feed({"status": "Pushed", "id": "a1", "progressDetail": {}})
    assert p.line() == "2.0 MB sent of 2.0 MB, 2/2 layers done"


@pytest.mark.docker
def test_without_push_an_unchanged_cell_reuses_its_local_image(
    tmp_path: Path, base_image: str, docker_client: Any
) -> None:
    root = tmp_path / "cells"
    name = f"local-{time.time_ns()}"
    make_cell(root, name, base_image)
    options = CiBuildOptions(network="none", allow_cpu=True)
    try:
        first = build_cells(root, options, progress=PlainProgress(lambda s: None))
        lines: list[str] = []
        second = build_cells(root, options, progress=PlainProgress(lines.append))
        (a,), (b,) = first.cells, second.cells
        assert a.ok and b.ok and b.build == "reused" and b.image_id == a.image_id
        assert any(x.startswith(f"[{name}] unchanged since the last run") for x in lines)
        # gone from the engine: built again
        docker_client.images.remove(a.tag, force=True)
        third = build_cells(root, options, progress=PlainProgress(lambda s: None))
        assert third.cells[0].build in ("ok", "cached") and third.cells[0].ok
    finally:
        with contextlib.suppress(Exception):
            docker_client.images.remove(f"envlock-ci:{name}", force=True)


def test_heartbeat_speaks_for_a_silent_cell_and_only_for_it(tmp_path: Path) -> None:
    """A cell pushing quietly gets a line every `interval` seconds saying how far the
    push is; a cell that just spoke, a queued one and a finished one get none."""
    import threading

    from envlock.ci.progress import heartbeat
    from envlock.image.push import PushProgress

    sent = PushProgress()
    sent.feed(
        {"status": "Pushing", "id": "l1", "progressDetail": {"current": 10**6, "total": 4 * 10**6}}
    )
    quiet = CellOutcome("quiet", tmp_path, "r:quiet", stage="push")
    quiet.said, quiet.started, quiet.pulse = (
        time.monotonic() - 5,
        time.perf_counter(),
        lambda: f"push: {sent.line()}",
    )
    talking = CellOutcome("talking", tmp_path, "r:talking", stage="build")
    queued = CellOutcome("queued", tmp_path, "r:queued")
    done = CellOutcome("done", tmp_path, "r:done", stage="done")
    for o in (talking, done):
        o.said = time.monotonic() + 3600  # spoke "just now" for the whole test
    lines: list[str] = []
    stop = threading.Event()
    beat = threading.Thread(
        target=heartbeat,
        args=([quiet, talking, queued, done], PlainProgress(lines.append), 0.2, stop),
    )
    beat.start()
    time.sleep(0.7)
    stop.set()
    beat.join()
    assert lines and all(
        x.startswith("[quiet] ... push: 1.0 MB sent of 4.0 MB, 0/1 layers done") for x in lines
    ), lines
    assert 1 <= len(lines) <= 5, lines  # one per interval (0.2 s), not one per tick (0.05 s)


def test_a_second_ci_build_of_the_same_cells_is_exit_3_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38, break 7: ci build had no writer lock on its cells folder, so two
    runs wrote the cells' results and summary.json at once. The second one now
    stops before the engine is asked, and nothing of the first is touched."""
    import fcntl

    monkeypatch.setenv("DOCKER_HOST", DEAD_SOCKET)  # never reached
    root = _cells(tmp_path)
    with open(root / ".envlock-ci-build.lock", "a") as held:  # the first run's lock
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert main(["ci", "build", str(root)]) == 3
    err = capsys.readouterr().err
    assert err == (
        f"envlock: error: another envlock ci build is working on {root}\n"
        "  hint: wait for it to finish, then run ci build again\n"
    )
    # once it is released, the next run gets as far as the engine
    assert main(["ci", "build", str(root)]) == 3
    assert f"cannot reach the Docker Engine at {DEAD_SOCKET}" in capsys.readouterr().err
