"""envlock.readers: one strict reader per format, and the commands that use them.

Every defect of a file envlock reads is one error naming the file and the
problem (exit 2), never a traceback: missing files, folders, FIFOs, bytes that
are not UTF-8, TOML and JSON syntax, NaN, numbers of thousands of digits, keys
given twice, lone surrogates, documents nested thousands deep.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from envlock import readers
from envlock.cli import main
from envlock.errors import DataError, EnvironmentFailure, UsageError

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden" / "render"


# ------------------------------------------------------------------ files


def test_read_text_refuses_each_kind_of_bad_file(tmp_path: Path) -> None:
    good = tmp_path / "good.txt"
    good.write_text("tensorflow==2.15\n", encoding="utf-8")
    assert readers.read_text(good, "-r") == "tensorflow==2.15\n"
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"numpy\nsch\xf6n\n")
    surrogate = tmp_path / "surrogate.txt"
    surrogate.write_bytes(b"x\xed\xa0\x80")  # UTF-8 bytes of a lone surrogate
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cases = [
        (tmp_path / "missing.txt", "no such file"),
        (tmp_path, "is a folder, not a file"),
        (fifo, "not a regular file (a FIFO)"),  # would block forever if opened
        (latin, "not UTF-8 text (byte 9, line 2)"),
        (surrogate, "not UTF-8 text (byte 1, line 1)"),
        (str(tmp_path / "nul\0byte"), "not a valid path"),
        (str(tmp_path / ("x" * 5000)), "cannot read it (File name too long)"),
    ]
    for path, problem in cases:
        with pytest.raises(UsageError) as info:
            readers.read_text(path, "-r")
        assert info.value.message.startswith("-r ") and info.value.message.endswith(problem)
        assert info.value.exit_code == 2 and info.value.hint


def test_read_bytes_bounds_the_size_and_takes_the_error_class(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    with pytest.raises(DataError, match=r"big: 101 bytes, more than the 100 allowed$"):
        readers.read_bytes(big, limit=100, error=DataError)
    assert readers.read_bytes(big, limit=101) == b"x" * 101


def test_read_optional_tells_absent_from_unreadable(tmp_path: Path) -> None:
    """None only when nothing is there (issue #38: absent is not unreadable)."""
    assert readers.read_optional(tmp_path / "missing") is None
    good = tmp_path / "good"
    good.write_bytes(b"ok")
    assert readers.read_optional(good) == b"ok"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 11)
    cases = [
        (fifo, "not a regular file (a FIFO)"),
        (Path("/dev/zero"), "not a regular file (a device)"),
        (dangling, f"a symbolic link to {tmp_path / 'gone'}, which does not exist"),
        (tmp_path, "is a folder, not a file"),
        (big, "11 bytes, more than the 10 allowed"),
    ]
    for path, problem in cases:
        with pytest.raises(EnvironmentFailure) as info:
            readers.read_optional(path, "state", limit=10, error=EnvironmentFailure)
        assert info.value.message == f"state {path}: {problem}"
        assert info.value.exit_code == 3


def test_follow_false_refuses_a_link_and_reads_a_file(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"secret")
    link = tmp_path / "link"
    link.symlink_to(target)
    assert readers.read_bytes(link) == b"secret"  # followed by default
    assert readers.read_bytes(target, follow=False) == b"secret"
    with pytest.raises(UsageError) as info:
        readers.read_bytes(link, "kernel.json", follow=False)
    assert info.value.message == (
        f"kernel.json {link}: a symbolic link (to {target}); envlock does not read through it"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_is_permission_denied(tmp_path: Path) -> None:
    locked = tmp_path / "locked.json"
    locked.write_text("{}")
    locked.chmod(0)
    with pytest.raises(UsageError, match=r"locked.json: permission denied$"):
        readers.read_json(locked)


def test_paths_and_values_in_messages_stay_on_one_short_line() -> None:
    assert readers.shown("/tmp/a b.json") == "/tmp/a b.json"
    assert readers.shown("/tmp/a\nb") == "'/tmp/a\\nb'"
    assert readers.shown("x\udcff") == "'x\\udcff'"
    long = readers.shown("y" * 5000)
    assert len(long) < 230 and long.endswith("... (5000 characters)")
    assert readers.quoted("3.11") == "'3.11'"
    assert readers.quoted("9" * 5000) == repr("9" * 80) + "... (5000 characters)"


# ------------------------------------------------------------------- JSON


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "Expecting property name enclosed in double quotes (line 1, column 2)"),
        ('{"seed": NaN}', "NaN is not a JSON number"),
        ('{"seed": -Infinity}', "-Infinity is not a JSON number"),
        ('{"seed": 1e400}', "the number 1e400 is not a finite number"),
        ('{"seed": ' + "9" * 5000 + "}", "a number of 5000 digits"),
        ('{"seed": 0.' + "1" * 200 + "}", "a number of 202 characters"),
        ('{"seed": 1, "seed": 2}', "duplicate key 'seed' in one object"),
        ('{"a": "\\ud800"}', "a lone surrogate in the string '\\ud800' at a"),
        ('{"\\udcff": 1}', "a lone surrogate in the key '\\udcff'"),
        ("[" * 65 + "]" * 65, "nested more than 64 levels deep"),
        ("[" * 100000 + "]" * 100000, "nested more than 64 levels deep"),
        ('\ufeff{"a": 1}', "starts with a byte-order mark"),
    ],
)
def test_parse_json_is_strict(text: str, problem: str) -> None:
    with pytest.raises(UsageError) as info:
        readers.parse_json(text, "runtime.json")
    assert info.value.message == f"runtime.json: not valid JSON: {problem}"


def test_parse_json_keeps_what_json_means() -> None:
    doc = readers.parse_json('{"a": [1, 2.5, -0, true, null, "\\ud83d\\ude00"], "b": {}}', "x")
    assert doc == {"a": [1, 2.5, 0, True, None, "\U0001f600"], "b": {}}
    assert readers.parse_json("[" * 64 + "]" * 64, "x") is not None
    assert readers.parse_json(b'{"k": "\xc3\xa9"}', "x") == {"k": "\u00e9"}
    with pytest.raises(UsageError, match=r"x: not UTF-8 text \(byte 7, line 1\)"):
        readers.parse_json(b'{"k": "\xe9"}', "x")


# ------------------------------------------------------------------- TOML


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a = [1,\nb = 2\n", "not valid TOML: "),
        ("a = " + "9" * 5000 + "\n", "not valid TOML: a number too long"),
        ("a = " + "[" * 5000 + "]" * 5000 + "\n", "not valid TOML: nested too deeply"),
    ],
)
def test_parse_toml_names_the_problem(text: str, problem: str) -> None:
    with pytest.raises(DataError) as info:
        readers.parse_toml(text, "m.toml", error=DataError)
    assert info.value.message.startswith(f"m.toml: {problem}")


def test_toml_syntax_errors_say_where(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('x = 1\ny = "open\n', encoding="utf-8")
    with pytest.raises(UsageError, match=r"bad.toml: not valid TOML: .*line 2"):
        readers.read_toml(bad)


# ------------------------------------------------------- through the commands


def bundle(tmp_path: Path) -> Path:
    target = tmp_path / "bundle"
    target.mkdir()
    for name in ("pylock.toml", "requirements.txt"):
        shutil.copy(GOLDEN / "tf2.15-pip" / name, target / name)
    return target


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err
    return code, err


RUNTIME = {"schema": "envlock.runtime/v1", "seed": 7}


@pytest.mark.parametrize(
    ("name", "data", "problem"),
    [
        # each of these was a traceback or was accepted before envlock.readers
        ("runtime.json", '{"seed": ' + "9" * 5000 + "}", "not valid JSON: a number of 5000 digits"),
        ("runtime.json", "[" * 100000, "not valid JSON: nested more than 64 levels deep"),
        ("render.json", '{"os": ' + "9" * 5000 + "}", "not valid JSON: a number of 5000 digits"),
        (
            "render.json",
            '{"schema": "envlock.render/v1", "os": null, "os": "ubuntu22.04"}',
            "not valid JSON: duplicate key 'os' in one object",
        ),
        (
            "runtime.json",
            '{"schema": "envlock.runtime/v1", "seed": 7, "seed": 8}',
            "not valid JSON: duplicate key 'seed' in one object",
        ),
        (
            "runtime.json",
            '{"schema": "envlock.runtime/v1", "seed": NaN}',
            "not valid JSON: NaN is not a JSON number",
        ),
        (
            "runtime.json",
            '{"schema": "envlock.runtime/v1", "visible_devices": "0\\udcff"}',
            "not valid JSON: a lone surrogate in the string",
        ),
        (
            "runtime.json",
            b'{"schema": "envlock.runtime/v1\xff"}',
            "not UTF-8 text (byte 30, line 1)",
        ),
        ("runtime.json", None, "is a folder, not a file"),  # was exit 3, "check the disk"
        ("render.json", None, "is a folder, not a file"),
    ],
)
def test_render_refuses_bad_bundle_files_clearly(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    data: str | bytes | None,
    problem: str,
) -> None:
    folder = bundle(tmp_path)
    path = folder / name
    if data is None:
        path.mkdir()
    elif isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    code, err = run(["render", str(folder)], capsys)
    assert code == 2, err
    assert err.startswith(f"envlock: error: {path}: {problem}"), err
    assert "Traceback" not in err and "\n  hint: " in err
    assert not (folder / "Dockerfile").exists()  # nothing written


def test_render_still_takes_a_good_runtime_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = bundle(tmp_path)
    (folder / "runtime.json").write_text(json.dumps(RUNTIME), encoding="utf-8")
    code, err = run(["render", str(folder)], capsys)
    assert code == 0, err
    assert json.loads((folder / "runtime.json").read_text())["seed"] == 7


def test_matrix_file_that_is_a_fifo_is_refused_not_waited_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "tensorflow.toml"
    os.mkfifo(fifo)  # opening it for reading would block until a writer comes
    code, err = run(["matrix", "show", "--matrix", str(fifo)], capsys)
    assert code == 2
    assert err.startswith(f"envlock: error: {fifo}: not a regular file (a FIFO)\n")
    bad = tmp_path / "big.toml"
    bad.write_text("schema_version = " + "1" * 5000 + "\n", encoding="utf-8")
    code, err = run(["matrix", "show", "--matrix", str(bad)], capsys)
    assert code == 2 and err.startswith(f"envlock: error: {bad}: not valid TOML: a number too long")


def test_requirement_file_with_latin1_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from envlock.bundle.folder import read_requirement_file

    req = tmp_path / "req.txt"
    req.write_bytes(b"numpy==1.26.4\n# Sch\xf6n\n")
    with pytest.raises(UsageError, match=r"^-r .*req.txt: not UTF-8 text \(byte 19, line 2\)$"):
        read_requirement_file(str(req))
    with pytest.raises(UsageError, match=r"^-r .*: is a folder, not a file$"):
        read_requirement_file(str(tmp_path))


def test_smoke_host_refuses_a_bad_peaks_file_before_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    peaks = tmp_path / "peaks.json"
    peaks.write_text('[{"name": "NVIDIA H200", "tflops": {"fp32": Infinity}}]')
    code, err = run(["smoke", "--host", "--peaks", str(peaks)], capsys)
    assert code == 2
    assert err.startswith(f"envlock: error: --peaks {peaks}: not valid JSON: Infinity")


def test_ca_cert_that_is_a_fifo_is_refused_not_waited_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = bundle(tmp_path)
    fifo = tmp_path / "ca.pem"
    os.mkfifo(fifo)  # read_bytes() on it blocked forever
    code, err = run(["render", str(folder), "--ca-cert", str(fifo)], capsys)
    assert code == 2
    assert err.startswith(f"envlock: error: --ca-cert {fifo}: not a regular file (a FIFO)\n")


@pytest.mark.parametrize(("text", "kind"), [("7", "int"), ('"ab"', "str"), ("[]", "list")])
def test_runtime_json_that_is_not_an_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, kind: str
) -> None:
    """Found by bench/fuzz.py: a runtime.json holding 7 was a TypeError traceback."""
    folder = bundle(tmp_path)
    (folder / "runtime.json").write_text(text, encoding="utf-8")
    code, err = run(["render", str(folder)], capsys)
    assert code == 2
    assert err == (
        f"envlock: error: runtime.json: expected a JSON object, got {kind}\n"
        "  hint: fix runtime.json or delete it to get the defaults\n"
    )


def test_read_member_bounds_a_member_by_its_declared_and_its_actual_size(
    tmp_path: Path,
) -> None:
    """A member that says it is small but inflates past that (its local and central
    sizes rewritten) stops at its declared size and fails its CRC: never inflated
    whole."""
    import zipfile

    path = tmp_path / "w.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("small", b"ok")
        z.writestr("big", b"\0" * (1 << 20))
    with zipfile.ZipFile(path) as z:
        assert readers.read_member(z, "small", "w.zip") == b"ok"
        with pytest.raises(DataError) as e:
            readers.read_member(z, "big", "w.zip", limit=1000, error=DataError)
        assert e.value.message == "w.zip: big is 1048576 bytes, more than the 1000 allowed"
        # the declared size lies: zipfile reads no more than it, then the CRC fails
        z.getinfo("big").file_size = 10
        with pytest.raises(zipfile.BadZipFile, match="CRC"):
            readers.read_member(z, "big", "w.zip", limit=1000)
