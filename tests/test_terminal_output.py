"""Text from files, indexes, registries and reports reaches the terminal escaped
(issue #21): an ESC or OSC sequence in a check reason cannot repaint a row of
``verify`` or ``report show``, nor set the window title."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from report_support import cli, decode, make_bundle, signed_report

from envlock.output import escaped, table
from envlock.report import dsse, keys

# erase the line, move up, and write a fake row; then an OSC title and a C1 CSI
HOSTILE = "ok\x1b[2K\x1b[1A\rsignature  NOT checked\x1b]0;pwned\x07\x9b31m\u202etxt"


def test_escaped_shows_what_a_terminal_would_act_on() -> None:
    assert escaped(HOSTILE) == (
        "ok\\x1b[2K\\x1b[1A\\x0dsignature  NOT checked\\x1b]0;pwned\\x07\\x9b31m\\u202etxt"
    )
    assert escaped("two\nlines\tand a tab") == "two\nlines\tand a tab"
    assert escaped("a\nb", newlines=True) == "a\\x0ab"
    assert escaped("plain text, ünïcode, 中文") == "plain text, ünïcode, 中文"
    cell = table(["name"], [[HOSTILE]])
    assert "\x1b" not in cell and "\r" not in cell and "\\x1b[2K" in cell


def _foreign_report(tmp: Path, capsys: Any, reason: str) -> tuple[Path, Path]:
    """A report signed by someone else's tool: a benign one, its reason replaced
    and the statement signed again with the same key (DSSE, as any signer does)."""
    report, pub = signed_report(capsys, tmp, "sha256:" + "5e" * 32)
    envelope = json.loads(report.read_text(encoding="utf-8"))
    statement = decode(envelope)
    statement["predicate"]["envlock"]["smoke"]["checks"][3]["reason"] = reason  # op_on_gpu
    private = keys.load_private(keys.key_paths(tmp / "key")[0])
    signed = dsse.sign(envelope["payloadType"], json.dumps(statement).encode(), private)
    report.write_text(json.dumps(signed.to_dict()), encoding="utf-8")
    return report, pub


@pytest.mark.parametrize("command", ["show", "verify"])
def test_a_hostile_reason_is_shown_escaped(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_bundle(tmp_path)
    report, pub = _foreign_report(tmp_path, capsys, HOSTILE)
    argv = (
        ["report", "show", str(report)]
        if command == "show"
        else ["verify", str(report), "--key", str(pub)]
    )
    code, out, err = cli(capsys, *argv)
    assert "Traceback" not in err
    shown = out + err
    assert "\x1b" not in shown and "\x9b" not in shown and "\u202e" not in shown
    assert "\r" not in shown and "\x07" not in shown
    assert "\\x1b[2K" in shown, shown


def test_report_sign_refuses_a_reason_with_terminal_controls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from report_support import make_keys, smoke_result

    priv, _pub = make_keys(tmp_path)
    result = smoke_result()
    result["checks"][3]["reason"] = HOSTILE
    source = tmp_path / "result.json"
    source.write_text(json.dumps(result), encoding="utf-8")
    out = tmp_path / "r.json"
    code, _, err = cli(capsys, "report", "sign", str(source), "--key", str(priv), "-o", str(out))
    assert code == 2 and not out.exists()
    assert "checks[3].reason holds the terminal control U+001B" in err
    assert "\x1b" not in err


def test_json_output_stays_valid_json_and_keeps_the_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json escapes the same characters JSON's way (\\u001b, \\u009b, \\u202e): the
    terminal sees none raw, and a reader of the JSON gets the exact text back."""
    make_bundle(tmp_path)
    report, _pub = _foreign_report(tmp_path, capsys, HOSTILE)
    code, out, err = cli(capsys, "report", "show", str(report), "--json")
    assert code == 0, err
    assert "\x1b" not in out and "\x9b" not in out and "\u202e" not in out
    doc = json.loads(out)

    def strings(value: Any) -> list[str]:
        if isinstance(value, dict):
            return [s for v in value.values() for s in strings(v)]
        if isinstance(value, list):
            return [s for v in value for s in strings(v)]
        return [value] if isinstance(value, str) else []

    assert HOSTILE in strings(doc)  # the exact text, decoded from JSON's escapes
