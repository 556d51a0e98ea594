"""DIR/captured.json: where a bundle was captured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envlock.bundle import origin
from envlock.errors import UsageError


def test_origin_round_trips_and_knows_this_machine(tmp_path: Path) -> None:
    doc = {
        "python": {"version": "3.11.7", "libc": ["glibc", "2.36"]},
        "markers": {"platform_system": "Linux", "platform_machine": "x86_64"},
    }
    made = origin.from_probe(doc, "/srv/p/.venv/bin/python", "/srv/p/.venv")
    assert made.platform == "Linux x86_64, glibc 2.36"
    assert made.target == "/srv/p/.venv"
    origin.write(tmp_path, made)
    assert origin.read(tmp_path) == made
    assert made.here()
    elsewhere = origin.Origin("/usr/bin/python3", None, "3.11.7", "Linux x86_64", "0" * 16)
    assert not elsewhere.here()
    assert elsewhere.target == "/usr/bin/python3"


def test_a_bundle_without_one_has_no_origin(tmp_path: Path) -> None:
    assert origin.read(tmp_path) is None


@pytest.mark.parametrize("text", ["{", "[]", json.dumps({"schema": 1, "venv": 3})])
def test_a_damaged_one_is_named_with_a_way_out(tmp_path: Path, text: str) -> None:
    (tmp_path / origin.FILE).write_text(text)
    with pytest.raises(UsageError) as e:
        origin.read(tmp_path)
    assert e.value.message.startswith(f"{tmp_path / origin.FILE}: not")
    assert (
        e.value.hint
        == f"remove {tmp_path / origin.FILE} (the bundle works without it) or capture again"
    )
