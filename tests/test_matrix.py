"""The committed TensorFlow matrix: loading, validation, cross-check, show."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version

from envlock.cli import main
from envlock.errors import DataError
from envlock.matrix import check, load, load_tensorflow, read_toml, tensorflow, tested
from envlock.matrix.and_cuda import _strip_extra, and_cuda_requirements
from envlock.matrix.build_info import parse_build_info

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
COMMITTED = REPO / "envlock" / "data" / "matrices" / "tensorflow.toml"
NAME = "matrices/tensorflow.toml"


@functools.lru_cache(maxsize=1)
def _committed() -> dict[str, Any]:
    return tomllib.loads(COMMITTED.read_text(encoding="utf-8"))


def committed_doc() -> dict[str, Any]:
    return copy.deepcopy(_committed())


# -- the committed file -------------------------------------------------------


def test_committed_matrix_loads_with_every_2x_release() -> None:
    m = load()
    assert load() is m  # cached per process
    tf = m.tensorflow
    versions = [str(r.version) for r in tf.releases]
    finals = [r.version for r in tf.releases if not r.prerelease]
    # what is true of the rows, not how many there are (a new release is a data change)
    assert [r.version for r in tf.releases] == sorted(r.version for r in tf.releases)
    assert len(set(versions)) == len(versions)  # each release once
    assert str(finals[0]) == "2.0.0" and "2.21.0" in versions and "2.15.0.post1" in versions
    # release candidates are rows, flagged (2.22.0rc0, September 2026, among them)
    assert all(r.prerelease == r.version.is_prerelease for r in tf.releases)
    newest_rc = tf.get("2.22.0rc0")
    assert newest_rc is not None and newest_rc.prerelease
    assert m.digest == hashlib.sha256(COMMITTED.read_bytes()).hexdigest()
    assert m.data_version == tf.data_version == committed_doc()["data_version"]
    # every series from 2.0 to the newest is there (the newest may have release
    # candidates only), each series up to the newest final with a final release, and
    # the final patches of a series without a gap (2.16 starts at 2.16.1: no 2.16.0)
    minors = {r.version.minor for r in tf.releases}
    assert minors == set(range(max(minors) + 1)) and {r.version.major for r in tf.releases} == {2}
    final_minors = {v.minor for v in finals}
    assert final_minors == set(range(max(final_minors) + 1))
    for minor in final_minors:
        micros = sorted({v.micro for v in finals if v.minor == minor})
        assert micros == list(range(micros[0], micros[-1] + 1)), (minor, micros)
    # and each release TensorFlow's tested-build table names is a final row here
    configs = read_toml("tf-tested-configs.toml")[0]["configs"]
    assert {Version(c["version"]) for c in configs} <= set(finals)


def test_committed_rows_record_their_sources() -> None:
    tf = load_tensorflow()
    r = tf.get("2.15.1")
    assert r is not None
    assert (r.cuda, r.cudnn, r.cudnn_from) == ("12.2", "8.9", "build_info+and-cuda")
    assert r.python == ("3.9", "3.10", "3.11")
    assert "nvidia-cudnn-cu12==8.9.4.25" in r.and_cuda
    r = tf.get("2.18.0")
    assert r is not None and (r.cuda, r.cuda_full) == ("12.5", "12.5.1")
    for rel in tf.releases:
        if rel.version.release[:2] < (2, 14):  # 2.14.0rc0 has the extra too
            assert rel.and_cuda == ()
        else:
            assert any(a.startswith("nvidia-cudnn-cu") for a in rel.and_cuda)
        if rel.version < Version("2.1.0"):
            assert not rel.cuda_build and rel.cuda_from == "tested-configs"
        elif rel.version.release[:2] >= (2, 22):  # build_info states only the kind of build
            assert rel.cuda_build and rel.cuda_from == "cuda_config.h"
        else:
            assert rel.cuda_build and rel.cuda_from.startswith("build_info")


def test_committed_matrix_passes_the_cross_check() -> None:
    report = check.check_all()
    assert report.ok, [f.disagreement.describe() for f in report.findings if not f.explained]
    assert report.findings  # real disagreements exist, and each one is explained
    assert "matrices/tf-tested-configs.toml" in report.files


def test_check_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "check"]) == 0
    out = capsys.readouterr().out
    assert "2.0.0    cuda_build  not a CUDA build  CUDA 10.0       yes" in out
    assert out.rstrip().endswith("all explained by matrices/tf-notes.toml")
    assert main(["matrix", "check", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is True and doc["unexplained"] == 0
    assert {
        "version": "2.11.1",
        "field": "python",
        "wheels": "3.8-3.10",
        "tested_configs": "3.7-3.10",
        "explained": True,
        "note": "python: 2.11.1 publishes no Python 3.7 wheel, although its "
        "Requires-Python still says >=3.7",
    } in doc["disagreements"]


def test_check_fails_on_an_unexplained_disagreement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = COMMITTED.read_text(encoding="utf-8")
    # the 2.11.1 row loses its note: its Python disagreement is now unexplained
    marker = 'note = "python: 2.11.1 publishes no Python 3.7 wheel'
    start = text.index(marker)
    end = text.index("\n", start)
    bad = tmp_path / "tensorflow.toml"
    bad.write_text(text[:start] + 'note = ""' + text[end:], encoding="utf-8")
    assert main(["matrix", "check", "--matrix", str(bad)]) == 1
    captured = capsys.readouterr()
    assert (
        "unexplained: 2.11.1: python: wheels say 3.8-3.10, tested-configs say 3.7-3.10"
        in captured.out
    )
    assert "check failed: 1 unexplained disagreement(s)" in captured.err
    # --notes-only puts the reviewed note back, byte for byte
    assert main(["matrix", "refresh", "--notes-only", "-o", str(bad), "--json"]) == 0
    assert bad.read_bytes() == COMMITTED.read_bytes()


def test_check_fails_on_a_note_typed_by_hand(tmp_path: Path) -> None:
    text = COMMITTED.read_text(encoding="utf-8")
    i = text.index('version = "2.15.1"')
    j = text.index('\nnote = ""', i) + 1  # the row's note, not and_cuda_python_note
    bad = tmp_path / "tensorflow.toml"
    bad.write_text(text[:j] + 'note = "cuda: trust me"' + text[j + len('note = ""') :])
    report = check.check_all(bad)
    assert not report.ok
    assert report.note_problems == (
        "2.15.1: note 'cuda: trust me' differs from what tf-notes.toml gives ('')",
    )


def test_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "show"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == [
        "tensorflow",
        "python",
        "and-cuda",
        "python",
        "cuda",
        "cudnn",
        "newest",
        "cc",
        "uploaded",
        "cuda",
        "from",
        "remark",
    ]
    # and-cuda python: the minors --cuda-source pip can install; "-" when none
    # (2.13 has no [and-cuda] extra; 2.15.0's pins a tensorrt that is only an sdist)
    shown = {line.split()[0]: line.split() for line in lines[2:-4]}
    assert shown["2.13.1"] == [
        "2.13.1",
        "3.8-3.11",
        "-",
        "11.8",
        "8.6",
        "compute_80",
        "2023-09-26",
        "build_info",
        "-",
    ]
    assert shown["2.14.0"] == [
        "2.14.0",
        "3.9-3.11",
        "3.9-3.10",
        "11.8",
        "8.7",
        "compute_80",
        "2023-09-26",
        "build_info",
        "-",
    ]
    assert shown["2.15.0"] == [
        "2.15.0",
        "3.9-3.11",
        "-",
        "12.2",
        "8.9",
        "compute_80",
        "2023-11-14",
        "build_info",
        "-",
    ]
    assert shown["2.15.1"] == [
        "2.15.1",
        "3.9-3.11",
        "3.9-3.11",
        "12.2",
        "8.9",
        "compute_80",
        "2024-03-08",
        "build_info",
        "-",
    ]
    # a line for each row of the matrix, releases and release candidates (flagged)
    releases = [str(r.version) for r in load().tensorflow.releases]
    assert len(lines) == 2 + len(releases) + 4
    assert [line.split()[0] for line in lines[2:-4]] == releases
    assert shown["2.22.0rc0"][-2:] == ["cuda_config.h", "pre-release"]
    assert shown["2.21.0"][-1] == "-"
    assert max(len(line) for line in lines) <= 120
    assert main(["matrix", "show", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["version"] for r in rows] == releases
    assert [r["version"] for r in rows if r.get("prerelease")][-1] == "2.22.0rc0"
    row = next(r for r in rows if r["version"] == "2.21.0")
    assert row["python"] == ["3.10", "3.11", "3.12", "3.13"]
    assert (row["cuda"], row["cudnn"], row["cuda_full"]) == ("12.5", "9.3", "12.5.1")
    assert row["compute_capabilities"][-1] == "compute_90"
    # every table row's and-cuda column says what --json's and_cuda_python lists
    for r, line in zip(rows, lines[2:-4], strict=True):
        cells = line.split()
        assert cells[0] == r["version"]
        assert cells[2] == (tested.format_python_range(r["and_cuda_python"]) or "-")


# -- validation ---------------------------------------------------------------


def _parse_with(row_changes: dict[str, Any], index: int = 12) -> tensorflow.TFMatrix:
    doc = committed_doc()
    row = doc["releases"][index]
    for key, value in row_changes.items():
        if value is None:
            del row[key]
        else:
            row[key] = value
    return tensorflow.parse(doc, NAME)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"cudnn": "8"}, 'matrices/tensorflow.toml: releases[12].cudnn: expected "X.Y", got "8"'),
        (
            {"cuda": 12.2},
            "matrices/tensorflow.toml: releases[12].cuda: expected a string, got 12.2",
        ),
        ({"version": None}, "matrices/tensorflow.toml: releases[12].version: missing"),
        (
            {"version": "two"},
            'matrices/tensorflow.toml: releases[12].version: not a version: "two"',
        ),
        (
            {"version": "1.15.0"},
            'matrices/tensorflow.toml: releases[12].version: expected a 2.x release, got "1.15.0"',
        ),
        (
            {"python": ["3.10", "3.9"]},
            "matrices/tensorflow.toml: releases[12].python: expected distinct minors in "
            "ascending order",
        ),
        (
            {"python": ["3.9", "py3.10"]},
            'matrices/tensorflow.toml: releases[12].python[1]: expected "3.X", got "py3.10"',
        ),
        (
            {"cuda_from": "guess"},
            'matrices/tensorflow.toml: releases[12].cuda_from: expected one of "build_info", '
            '"build_info+tested-configs", "cuda_config.h", "tested-configs", got "guess"',
        ),
        (
            {"cuda_full": "11.8.0"},
            'matrices/tensorflow.toml: releases[12].cuda_full: "11.8.0" does not start with '
            'cuda "10.1"',
        ),
        (
            {"requires_python": ">=3.x"},
            "matrices/tensorflow.toml: releases[12].requires_python: not a version specifier: "
            '">=3.x"',
        ),
        (
            {"compute_capabilities": ["sm_50", "volta"]},
            "matrices/tensorflow.toml: releases[12].compute_capabilities[1]: expected "
            '"sm_XY or compute_XY", got "volta"',
        ),
        (
            {"and_cuda": ["nvidia-cudnn-cu12 ==="]},
            "matrices/tensorflow.toml: releases[12].and_cuda[0]: not a requirement",
        ),
        (
            {"and_cuda_python": ["3.13"]},
            'matrices/tensorflow.toml: releases[12].and_cuda_python[0]: "3.13" is not one of '
            "the release's python minors",
        ),
        (
            {"and_cuda_python": ["py3.8"]},
            'matrices/tensorflow.toml: releases[12].and_cuda_python[0]: expected "3.X", '
            'got "py3.8"',
        ),
        (
            {"and_cuda_python": ["3.8"]},
            "matrices/tensorflow.toml: releases[12].and_cuda_python: set, but the release has "
            "no and_cuda extra",
        ),
        (
            {"and_cuda_python_note": None},
            "matrices/tensorflow.toml: releases[12].and_cuda_python_note: missing",
        ),
        (
            {"sha256": "abc"},
            'matrices/tensorflow.toml: releases[12].sha256: expected "64 lowercase hex digits", '
            'got "abc"',
        ),
        (
            {"yanked": "no"},
            'matrices/tensorflow.toml: releases[12].yanked: expected true or false, got "no"',
        ),
        ({"colour": "blue"}, "matrices/tensorflow.toml: releases[12].colour: unknown field"),
    ],
)
def test_validation_errors_name_file_and_row(change: dict[str, Any], message: str) -> None:
    with pytest.raises(DataError) as info:
        _parse_with(change)
    assert str(info.value).startswith(message)
    assert info.value.hint


def test_document_level_errors() -> None:
    doc = committed_doc()
    doc["releases"].append(copy.deepcopy(doc["releases"][3]))
    with pytest.raises(
        DataError,
        match=r'releases\[108\]\.version: "2\.0\.3" is listed twice '
        r"\(also releases\[3\]\)",
    ):
        tensorflow.parse(doc, NAME)
    doc = committed_doc()
    doc["schema_version"] = 2
    with pytest.raises(
        DataError, match="schema_version: this envlock reads schema 1, the file has 2"
    ):
        tensorflow.parse(doc, NAME)
    doc = committed_doc()
    doc["data_version"] = "May 2026"
    with pytest.raises(
        DataError,
        match='^matrices/tensorflow.toml: data_version: expected "YYYY-MM-DD", got "May 2026"$',
    ):
        tensorflow.parse(doc, NAME)
    with pytest.raises(DataError, match=r"releases: expected a non-empty array"):
        tensorflow.parse({"schema_version": 1, "data_version": "2026-01-01"}, NAME)


def test_corrupt_file_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "tensorflow.toml"
    bad.write_text('schema_version = 1\n[[releases]\nversion = "2.15.1"\n')
    assert main(["matrix", "show", "--matrix", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"envlock: error: {bad}: not valid TOML: ")
    assert "Traceback" not in err
    assert main(["matrix", "check", "--matrix", str(tmp_path / "missing.toml")]) == 2
    assert f"{tmp_path / 'missing.toml'}: no such file" in capsys.readouterr().err


def test_dumps_round_trips_the_committed_file() -> None:
    tf = load_tensorflow()
    assert tensorflow.dumps(tf) == COMMITTED.read_text(encoding="utf-8")


# -- tested configurations and notes -------------------------------------------------


def test_tested_configs_cover_each_series() -> None:
    table = tested.load()
    cfg = table.for_release(Version("2.16.2"))
    assert cfg is not None and str(cfg.version) == "2.16.1"  # the table's row for 2.16
    cfg = table.for_release(Version("2.15.0.post1"))
    assert cfg is not None and (cfg.cuda, cfg.cudnn) == ("12.2", "8.9")
    cfg = table.for_release(Version("2.0.4"))
    assert cfg is not None and cfg.python_minors == ("2.7", "3.3", "3.4", "3.5", "3.6", "3.7")
    assert table.for_release(Version("2.22.0")) is None
    # every row of tensorflow.toml has a table row for its series, but a release
    # candidate before its series' final release (upstream adds the row then)
    rows = load_tensorflow().releases
    assert [str(r.version) for r in rows if not table.for_release(r.version)] == ["2.22.0rc0"]


def test_python_range_parsing() -> None:
    assert tested.parse_python_range("2.7, 3.3-3.7") == ("2.7", "3.3", "3.4", "3.5", "3.6", "3.7")
    assert tested.parse_python_range("3.9-3.13") == ("3.9", "3.10", "3.11", "3.12", "3.13")
    for bad, why in (
        ("3.9-2.7", "spans two major"),
        ("3.12-3.9", "runs backwards"),
        ("3", "is not X.Y"),
        ("", "empty"),
    ):
        with pytest.raises(ValueError, match=why):
            tested.parse_python_range(bad)
    assert tested.format_python_range(["3.5", "3.6", "3.7", "3.9"]) == "3.5-3.7, 3.9"


minors = st.lists(st.tuples(st.integers(2, 3), st.integers(0, 30)), min_size=1, max_size=20)


@given(minors)
def test_python_range_round_trip(pairs: list[tuple[int, int]]) -> None:
    items = [f"{a}.{b}" for a, b in pairs]
    text = tested.format_python_range(items)
    parsed = tested.parse_python_range(text)
    assert set(parsed) == set(items)
    assert list(parsed) == sorted(set(parsed), key=Version)
    assert tested.format_python_range(parsed) == text


@given(st.text(max_size=40))
def test_python_range_rejects_with_valueerror_only(text: str) -> None:
    try:
        out = tested.parse_python_range(text)
    except ValueError:
        return
    assert out and all(Version(m) for m in out)


def test_notes_file_errors() -> None:
    base = {"schema_version": 1}
    ok = {"releases": "==2.0.0", "field": "python", "text": "why"}
    assert check.parse_notes({**base, "notes": [ok]}, "n.toml")[0].field == "python"
    cases = [
        ({**ok, "field": "colour"}, r"n\.toml: notes\[0\]\.field: expected one of"),
        ({**ok, "releases": "2.0"}, r"n\.toml: notes\[0\]\.releases: not a version specifier"),
        ({**ok, "releases": ["==2.0.0", 5]}, r"notes\[0\]\.releases\[1\]: expected a string"),
        ({**ok, "text": "a; b"}, r"notes\[0\]\.text: must be one line without '; '"),
        ({**ok, "when": "always"}, r"notes\[0\]\.when: unknown field"),
    ]
    for row, pattern in cases:
        with pytest.raises(DataError, match=pattern):
            check.parse_notes({**base, "notes": [row]}, "n.toml")


# -- what refresh reads from a wheel ------------------------------------------------


def test_build_info_shapes() -> None:
    assert parse_build_info(
        "import collections\nbuild_info = collections.OrderedDict([('cuda_version', '12.2'), "
        "('cudnn_version', '8'), ('cuda_compute_capabilities', ['sm_50', 'compute_80'])])\n"
    ) == {
        "cuda_version": "12.2",
        "cudnn_version": "8",
        "cuda_compute_capabilities": ["sm_50", "compute_80"],
    }
    assert parse_build_info("build_info = {'cuda_version': '10.1', 'is_cuda_build': True}") == {
        "cuda_version": "10.1",
        "is_cuda_build": True,
    }
    assert parse_build_info(
        "is_cuda_build = True\ncuda_version_number = '10'\ncudnn_version_number = '7'\n"
    ) == {"is_cuda_build": True, "cuda_version": "10", "cudnn_version": "7"}
    with pytest.raises(DataError, match="not valid Python"):
        parse_build_info("build_info = {", "w.whl:build_info.py")


def test_build_info_is_never_executed(tmp_path: Path) -> None:
    flag = tmp_path / "ran"
    text = (
        f"import os\nbuild_info = dict(cuda_version=os.system('touch {flag}'))\n"
        f"cuda_version_number = open('{flag}', 'w')\n"
    )
    assert parse_build_info(text) == {}
    assert not flag.exists()


@settings(max_examples=200)
@given(st.text(max_size=200))
def test_build_info_parser_on_any_text(text: str) -> None:
    """Any text gives a DataError naming the file, or what it assigns; and an
    assignment after it is read back, beside what the text gave alone."""
    try:
        out = parse_build_info(text)
    except DataError as e:
        assert str(e).startswith("build_info.py: not valid Python: ")
        return
    probe = parse_build_info(text + "\nenvlock_probe = ['12.2', 8, True]\n")
    assert probe == {**out, "envlock_probe": ["12.2", 8, True]}


def test_and_cuda_extra_in_both_metadata_styles() -> None:
    lines = [
        "nvidia-cublas-cu12 (==12.2.5.6) ; extra == 'and-cuda'",
        'nvidia-cudnn-cu12 ==8.9.4.25 ; extra == "and-cuda"',
        'nvidia-nccl-cu12<3.0,>=2.27.7; extra == "and-cuda"',
        'tensorrt==8.6.1; platform_system == "Linux" and extra == "and-cuda"',
        'tensorflow-intel (==2.15.1) ; platform_system == "Windows"',
        "absl-py (>=1.0.0)",
        'tensorflow-io-gcs-filesystem>=0.23.1; extra == "gcs-filesystem"',
    ]
    assert and_cuda_requirements(lines, "3.11") == (
        "nvidia-cublas-cu12==12.2.5.6",
        "nvidia-cudnn-cu12==8.9.4.25",
        "nvidia-nccl-cu12<3.0,>=2.27.7",
        'tensorrt==8.6.1; platform_system == "Linux"',
    )
    assert _strip_extra('(python_version < "3.13") and extra == "and-cuda"') == (
        'python_version < "3.13"'
    )


# -- property: any damaged row is a DataError naming the row, never a crash ----------------

values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.lists(st.text(max_size=6), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(_committed()["releases"][0])), values, st.integers(0, 70))
def test_damaged_rows_fail_cleanly(key: str, value: Any, index: int) -> None:
    row = copy.deepcopy(_committed()["releases"][index])
    if value is None:
        del row[key]
    else:
        row[key] = value
    doc = {"schema_version": 1, "data_version": "2026-01-01", "releases": [row]}
    try:
        m = tensorflow.parse(doc, NAME)
    except DataError as e:
        assert str(e).startswith(f"{NAME}: releases[0].")
        return
    assert len(m.releases) == 1
