"""DIR/captured.json: where a bundle was captured."""

from __future__ import annotations

import json
import os
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
    back = origin.read(tmp_path)
    assert back == made
    assert back is not None and back.verified and back.here()
    assert origin.ignored(tmp_path, back) is None
    elsewhere = origin.Origin("/usr/bin/python3", None, "3.11.7", "Linux x86_64", "0" * 16)
    origin.write(tmp_path, elsewhere)
    back = origin.read(tmp_path)
    assert back is not None and back.verified and not back.here()
    assert elsewhere.target == "/usr/bin/python3"
    assert origin.ignored(tmp_path, back) == (
        f"{tmp_path / origin.FILE} names /usr/bin/python3, but it was captured on another "
        "machine, so it is not used; to act on that environment, pass --venv /usr/bin/python3"
    )


FORGED = {
    "schema": 1,
    "interpreter": "/home/victim/other/.venv/bin/python",
    "venv": "/home/victim/other/.venv",
    "python": "3.11.7",
    "platform": "Linux x86_64, glibc 2.36",
}


@pytest.mark.parametrize(
    "mac",
    [None, "0" * 64, "not hex", 7],
    ids=["no-mac", "wrong-mac", "not-hex", "not-text"],
)
def test_a_forged_one_with_this_machines_digest_is_only_a_hint(tmp_path: Path, mac: object) -> None:
    """Issue 38, break 2: the machine digest is public (hostname and
    /etc/machine-id, which any local user reads), so a captured.json that names it
    is no proof that this user's envlock wrote it; without this user's MAC it is
    never a default target."""
    doc: dict[str, object] = {**FORGED, "machine": origin.machine_id()}
    if mac is not None:
        doc["mac"] = mac
    (tmp_path / origin.FILE).write_text(json.dumps(doc))
    if not isinstance(mac, (str, type(None))):
        with pytest.raises(UsageError):
            origin.read(tmp_path)
        return
    found = origin.read(tmp_path)
    assert found is not None and not found.verified and not found.here()
    assert origin.ignored(tmp_path, found) == (
        f"{tmp_path / origin.FILE} names /home/victim/other/.venv, but this user's envlock "
        "did not write it here (its MAC does not match), so it is not used; to act on that "
        "environment, pass --venv /home/victim/other/.venv"
    )


def test_one_written_under_another_users_key_or_edited_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = origin.Origin(FORGED["interpreter"], FORGED["venv"], "3.11.7", "Linux", "")
    made = origin.Origin(**{**made.__dict__, "machine": origin.machine_id()})
    monkeypatch.setenv("ENVLOCK_STATE_DIR", str(tmp_path / "colleague"))
    origin.write(tmp_path, made)
    found = origin.read(tmp_path)
    assert found is not None and found.here()  # the colleague's own envlock believes it
    monkeypatch.setenv("ENVLOCK_STATE_DIR", str(tmp_path / "me"))
    found = origin.read(tmp_path)
    assert found is not None and not found.here()
    # one field changed after the MAC was made: not trusted either, even by its writer
    monkeypatch.setenv("ENVLOCK_STATE_DIR", str(tmp_path / "colleague"))
    doc = json.loads((tmp_path / origin.FILE).read_text())
    doc["venv"] = "/home/victim/.venv"
    (tmp_path / origin.FILE).write_text(json.dumps(doc))
    found = origin.read(tmp_path)
    assert found is not None and found.venv == "/home/victim/.venv" and not found.here()


def test_a_special_file_or_a_huge_one_is_refused_without_reading_it(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / origin.FILE)
    with pytest.raises(UsageError) as e:
        origin.read(tmp_path)  # a FIFO would block a plain read forever
    assert "not a regular file" in e.value.message
    os.unlink(tmp_path / origin.FILE)
    (tmp_path / origin.FILE).write_bytes(b" " * (origin.MAX_BYTES + 1))
    with pytest.raises(UsageError) as e:
        origin.read(tmp_path)
    assert "allowed" in e.value.message


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
