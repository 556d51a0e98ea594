"""Property tests of resolve() over the real matrices (hypothesis).

- the answer satisfies every constraint it was given;
- no newer release would have satisfied them;
- the same input gives the same output;
- any input, however bad, gives a Resolution or an EnvlockError, never another
  exception (and through the CLI: exit 0 or 2, never a traceback).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envlock.cli import main
from envlock.errors import EnvlockError, NoResolution
from envlock.matrix import Matrix, load
from envlock.model import Gpu, Resolution
from envlock.resolve import Constraints, resolve
from envlock.smoke import OLDEST_PYTHON

MATRIX: Matrix = load()
VERSIONS = [r.version for r in MATRIX.tensorflow.releases]
SERIES = sorted({f"{v.major}.{v.minor}" for v in VERSIONS}, key=Version)
PYTHONS = [f"3.{m}" for m in range(5, 15)]
CUDAS = sorted({r.cuda for r in MATRIX.tensorflow.releases}, key=Version) + ["11", "12", "13.0"]
CUDNNS = sorted({r.cudnn for r in MATRIX.tensorflow.releases}, key=Version) + ["8", "9"]
DRIVERS = ["410.48", "418.39", "450.80.02", "470.82.01", "525.60.13", "535.104.05", "580"]
OSES = ["ubuntu16.04", "ubuntu18.04", "ubuntu20.04", "ubuntu22.04", "ubuntu24.04"]
GPUS = ["9.0", "8.0", "8.6", "7.5", "3.0", "NVIDIA H200", "Tesla T4", "NVIDIA A10"]

OPS = ["==", "!=", ">=", "<=", ">", "<", "~="]


@st.composite
def clauses(draw: st.DrawFn) -> str:
    op = draw(st.sampled_from(OPS))
    if op == "~=":
        version = draw(st.sampled_from([*SERIES, *(str(v) for v in VERSIONS)]))
    else:
        version = draw(st.sampled_from([*SERIES, *(str(v) for v in VERSIONS), "2.22", "1.15"]))
    return f"{op}{version}"


specs = st.builds(
    lambda cs: "tensorflow" + ",".join(cs), st.lists(clauses(), min_size=0, max_size=3)
)


@st.composite
def constraints(draw: st.DrawFn) -> Constraints:
    from envlock.resolve import Gpu

    gpus = draw(st.lists(st.sampled_from(GPUS), max_size=2))
    return Constraints(
        spec=draw(specs),
        python=draw(st.none() | st.sampled_from(PYTHONS)),
        cuda=draw(st.none() | st.sampled_from(CUDAS)),
        cudnn=draw(st.none() | st.sampled_from(CUDNNS)),
        driver=draw(st.none() | st.sampled_from(DRIVERS)),
        os=draw(st.none() | st.sampled_from(OSES)),
        cuda_source=draw(st.none() | st.sampled_from(["system", "pip"])),
        gpus=tuple(
            Gpu(name="", compute_capability=g) if g[0].isdigit() else Gpu(name=g) for g in gpus
        ),
    )


def wanted_versions(spec: str) -> SpecifierSet:
    """The user's meaning, computed independently: ==X.Y is the X.Y series."""
    parts = []
    for clause in spec[len("tensorflow") :].split(","):
        if not clause:
            continue
        if clause.startswith("==") and clause.count(".") == 1:
            parts.append(clause + ".*")
        else:
            parts.append(clause)
    return SpecifierSet(",".join(parts))


def _pre_allowed(c: Constraints) -> bool:
    return c.prereleases or bool(wanted_versions(c.spec).prereleases)


def check_satisfies(res: Resolution, c: Constraints) -> None:
    version = Version(res.version)
    assert version in wanted_versions(c.spec)
    rel = MATRIX.tensorflow.get(version)
    assert rel is not None and not rel.yanked
    # a release candidate only with --pre or a SPEC naming a pre-release (pip, uv)
    assert not version.is_prerelease or _pre_allowed(c)
    assert rel.cuda_build
    assert res.python in rel.python
    assert Version(res.python) >= Version(OLDEST_PYTHON)  # the smoke harness runs on it
    if c.python:
        assert res.python == c.python
    if c.cuda:
        assert res.cuda == c.cuda or res.cuda.split(".")[0] == c.cuda
    if c.cudnn:
        assert res.cudnn == c.cudnn or res.cudnn.split(".")[0] == c.cudnn
    if c.driver and Version(res.driver_min) > Version(c.driver):
        # the host floor is above the driver only for a data-center GPU's PTX JIT, which
        # the container's forward-compatibility libraries serve on an excepted branch
        host = " ".join(res.reasons)
        assert "host venv: too old for the PTX JIT" in host, res.reasons
        assert "forward-compatibility libraries JIT-compile the PTX" in host, res.reasons
        assert "refused by the container runtime" not in host, res.reasons
    if c.os:
        assert res.os == c.os
    assert res.base_image.endswith("-" + res.os)
    if c.cuda_source:
        assert res.cuda_source == c.cuda_source
    if res.cuda_source == "system":
        assert "-runtime-" in res.base_image and "cudnn" in res.base_image
        if res.image_cudnn:
            assert Version(res.image_cudnn).major == Version(res.cudnn).major
            assert Version(res.image_cudnn) >= Version(res.cudnn)
    else:
        assert "-base-" in res.base_image and res.and_cuda
        # the pip source only with a Python every and-cuda requirement has wheels for
        assert res.python in rel.and_cuda_python
    image_cuda = Version(res.cuda_image_version)
    assert image_cuda.major == Version(res.cuda).major
    assert image_cuda.release[:2] >= Version(res.cuda).release[:2]


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(constraints())
# found by this test: a data-center GPU whose PTX JIT only a container serves, beside
# a GPU of unknown brand the container runtime refuses on that driver (no placement
# serves both); and '!=X.YrcN', which admits no pre-release (packaging, pip)
@example(
    Constraints(
        spec="tensorflow",
        driver="535.104.05",
        gpus=(Gpu("", "8.0", None), Gpu("NVIDIA H200", None, None)),
    )
)
@example(Constraints(spec="tensorflow!=2.7.0rc0"))
def test_answer_satisfies_everything_and_is_the_newest(c: Constraints) -> None:
    try:
        res = resolve(c, MATRIX)
    except NoResolution:
        # then no release at all satisfies them: each one pinned alone fails too
        for v in VERSIONS:
            if v in wanted_versions(c.spec) and not v.is_prerelease:
                with pytest.raises(NoResolution):
                    resolve(_pinned(c, v), MATRIX)
        return
    check_satisfies(res, c)
    # no newer release would do (release candidates only where they were candidates)
    for v in VERSIONS:
        if v.is_prerelease and not _pre_allowed(c):
            continue
        if v > Version(res.version) and v in wanted_versions(c.spec):
            with pytest.raises(NoResolution):
                resolve(_pinned(c, v), MATRIX)
    # same input, same output
    again = resolve(c, MATRIX)
    assert again == res
    assert again.to_dict() == res.to_dict()
    assert Resolution.from_dict(res.to_dict()) == res


def _pinned(c: Constraints, v: Version) -> Constraints:
    return replace(c, spec=f"tensorflow==={v}")


junk = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30
) | st.sampled_from(["", " ", "3.", "3.11.2", "12.", "-1", "auto", "ubuntu", "1e9", "٣.١١"])


@settings(max_examples=300, deadline=None)
@given(
    spec=junk | specs,
    python=st.none() | junk,
    cuda=st.none() | junk,
    cudnn=st.none() | junk,
    driver=st.none() | junk,
    os=st.none() | junk,
)
def test_bad_input_never_escapes_as_another_exception(
    spec: str,
    python: str | None,
    cuda: str | None,
    cudnn: str | None,
    driver: str | None,
    os: str | None,
) -> None:
    c = Constraints(spec=spec, python=python, cuda=cuda, cudnn=cudnn, driver=driver, os=os)
    try:
        resolve(c, MATRIX)
    except EnvlockError as e:
        assert e.exit_code == 2
        assert e.message and "\n" not in e.message


# capsys is read (and so emptied) once per example
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(spec=junk | specs, python=st.none() | junk, driver=st.none() | junk)
def test_cli_exit_codes(
    spec: str,
    python: str | None,
    driver: str | None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["resolve", spec, "--json"]
    if python is not None:
        args += [f"--python={python}"]
    if driver is not None and driver.strip().lower() != "auto":
        args += [f"--driver={driver}"]
    try:
        code = main(args)
    except SystemExit as e:  # argparse: a spec that looks like an option
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    assert code in (0, 2)
    assert "Traceback" not in err
    if code == 0:
        assert out.startswith("{")
    else:
        assert err.startswith(("envlock: error: ", "usage: "))
