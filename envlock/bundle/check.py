"""``envlock lock --check DIR``: would ``envlock lock`` change the bundle?

The lock is recomputed from the input DIR/pylock.toml records, every file lock
writes into DIR is made again with the render options DIR/render.json records
(those given on the command line win), and each is compared with DIR's copy.
Nothing is written.
"""

from __future__ import annotations

import difflib
import os
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

from envlock.bundle.folder import Progress, bundle_files, recorded_options
from envlock.bundle.manifest import recover_bundle
from envlock.errors import UsageError
from envlock.lock.core import lock
from envlock.lock.pylock import PYLOCK, driver_line, read_lock, regenerate_command
from envlock.lock.requirements import REQUIREMENTS
from envlock.model import Lock
from envlock.render import EXECUTABLE, RenderOptions
from envlock.resolve import resolve

LOCK_FILES = frozenset((PYLOCK, REQUIREMENTS))  # what only a lock writes; render writes the rest

# What a file that is not "same" adds to the changes.
_STATE_LINES = {
    "missing": "! {path} missing",
    "differs": "! {path} would be rewritten",
    "not executable": "! {path} is not executable",
}


@dataclass(frozen=True)
class CheckRequest:
    """``envlock lock --check DIR`` as plain values."""

    folder: Path
    resolver: str | None = None  # None: the one the lock was made with
    index_url: str | None = None  # None: the recorded one, else the configuration
    offline: bool = False
    render: RenderOptions = field(default_factory=RenderOptions)  # given; else render.json


@dataclass(frozen=True)
class CheckResult:
    folder: Path
    lock: Lock  # as `envlock lock` would make it now
    changes: tuple[str, ...]  # one line each: packages, resolution, then files
    files: tuple[dict[str, str], ...]  # {"path", "state": same | differs | missing | ...}
    notes: tuple[str, ...]
    regenerate: str  # the command that writes the bundle again
    recovered: tuple[str, ...] = ()  # an interrupted write finished or undone first

    @property
    def ok(self) -> bool:
        return not self.changes

    @property
    def rendered_only(self) -> bool:
        """The lock is current and only files `envlock render` writes differ: re-render,
        no re-lock needed."""
        return (
            bool(self.changes)
            and all(r["state"] == "same" or r["path"] not in LOCK_FILES for r in self.files)
            and all(line.startswith("! ") for line in self.changes)
        )

    @property
    def fix(self) -> str:
        """The command that brings DIR in line: `envlock render DIR` when only rendered
        files differ, else the full `envlock lock ...` again."""
        if self.rendered_only:
            return f"envlock render {shlex.quote(str(self.folder))}"
        return self.regenerate

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def to_dict(self) -> dict[str, object]:
        """``envlock check --json`` (docs/output.md)."""
        return {
            "dir": str(self.folder),
            "ok": self.ok,
            "changes": list(self.changes),
            "files": list(self.files),
            "notes": list(self.notes),
            "regenerate": self.regenerate,
            "fix": self.fix,
        }

    def text(self) -> str:
        """The readable result: the notes, then current, or each change and the fix."""
        out = [f"note: {note}\n" for note in self.notes]
        if self.ok:
            r = self.lock.resolution
            out.append(
                f"{self.folder}: the lock is current ({len(self.lock.packages)} packages, "
                f"{r.framework} {r.version}); all {len(self.files)} files lock writes match\n"
            )
            return "".join(out)
        out.append(f"{self.folder}: `envlock lock` would change the bundle:\n")
        out += [f"  {line}\n" for line in self.changes]
        out += ["\n" + row["diff"] for row in self.files if row.get("diff")]
        if self.rendered_only:
            out.append(
                f"\nthe lock is current; only rendered files differ: {self.fix}\n"
                f"(a full re-lock: {self.regenerate})\n"
            )
        else:
            out.append(f"\nregenerate: {self.regenerate}\n")
        return "".join(out)


def diff_locks(old: Lock, new: Lock) -> list[str]:
    """What changed between two locks, one line per change, packages first."""
    changes: list[str] = []
    before = {p.name: p for p in old.packages}
    after = {p.name: p for p in new.packages}
    for name in sorted(before.keys() | after.keys()):
        a, b = before.get(name), after.get(name)
        if a is None and b is not None:
            changes.append(f"+ {name} {b.version} (new)")
        elif b is None and a is not None:
            changes.append(f"- {name} {a.version} (no longer needed)")
        elif a is not None and b is not None:
            if a.version != b.version:
                changes.append(f"~ {name} {a.version} -> {b.version}")
            elif set(a.hashes) != set(b.hashes):
                changes.append(f"~ {name} {a.version}: wheels or hashes differ from the index")
            elif a.files != b.files:
                changes.append(f"~ {name} {a.version}: wheel urls or sizes changed")
    old_r, new_r = old.resolution.to_dict(), new.resolution.to_dict()
    for key in old_r:
        if old_r[key] != new_r.get(key):
            changes.append(f"~ resolution.{key}: {old_r[key]!r} -> {new_r.get(key)!r}")
    if old.top_requirements != new.top_requirements:
        changes.append(
            f"~ requirements given to the resolver: {' '.join(old.top_requirements)} -> "
            f"{' '.join(new.top_requirements)}"
        )
    if old.resolver != new.resolver:
        changes.append(f"~ resolver: {old.resolver} -> {new.resolver}")
    if old.gpu is not None and new.gpu is not None and old.gpu != new.gpu:
        if old.gpu.driver_min != new.gpu.driver_min or old.gpu.set_by != new.gpu.set_by:
            changes.append(
                f"~ driver floor: >= {old.gpu.driver_min} ({old.gpu.set_by}) -> "
                f">= {new.gpu.driver_min} ({new.gpu.set_by})"
            )
        else:
            changes.append("~ the CUDA facts of the locked packages (tool.envlock.gpu)")
    return changes


def compare_files(folder: Path, files: dict[str, bytes]) -> list[dict[str, str]]:
    """Each file lock would write, against DIR: same, differs, missing, or (for
    bootstrap.sh) not executable. Files in DIR that lock does not write are not
    looked at. A file that is there but cannot be read (a FIFO, a device, over
    64 MiB, no permission) is exit 2 naming it, not "missing"."""
    from envlock.readers import read_optional

    rows: list[dict[str, str]] = []
    for name, data in files.items():
        path = folder / name
        current = read_optional(path, hint=f"remove or replace {path}, then check again")
        row = {"path": name}
        if current is None:
            row["state"] = "missing"
        elif current != data:
            row["state"] = "differs"
            row["diff"] = unified_diff(folder, name, current, data)
        elif name in EXECUTABLE and not os.stat(path).st_mode & 0o111:
            row["state"] = "not executable"
        else:
            row["state"] = "same"
        rows.append(row)
    return rows


def unified_diff(folder: Path, name: str, current: bytes, wanted: bytes) -> str:
    """``diff -u`` of DIR's file against what lock would write (a note for binary data)."""
    try:
        a = current.decode("utf-8").splitlines(keepends=True)
        b = wanted.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return f"Binary files {folder / name} and (what lock writes) differ\n"
    lines = difflib.unified_diff(a, b, f"{folder / name}", f"{folder / name} (lock writes)")
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


def _render_flags(options: RenderOptions) -> list[str]:
    flags: list[str] = []
    for flag, value in (
        ("--base-image", options.base_image),
        ("--base-digest", options.base_digest),
        ("--ca-cert", options.ca_cert),
        ("--python-from", options.python_from),
    ):
        if value:
            flags += [flag, value]
    return flags


def check_folder(request: CheckRequest, progress: Progress | None = None) -> CheckResult:
    """Recompute DIR's lock and bundle and compare them with DIR's files: resolve
    again from the constraints the lock records, then lock as ``envlock lock`` does."""
    folder = request.folder
    recovered = recover_bundle(folder)  # an interrupted write is finished or undone first
    old = read_lock(folder)
    options, note = recorded_options(folder, request.render)
    notes = [note] if note else []
    if note is not None and options.os is None:
        options = replace(options, os=old.input.constraints.os)  # lock renders with its --os
    ca_cert = options.ca_cert
    if ca_cert and request.render.ca_cert is None and not Path(ca_cert).expanduser().is_file():
        raise UsageError(
            f"{folder} was rendered with --ca-cert {ca_cert}, which is not readable here",
            hint=f"give the CA file again: envlock lock --check {folder} --ca-cert FILE",
        )
    resolver = request.resolver or old.resolver or "uv"
    resolution = resolve(old.input.constraints)
    if progress:
        progress(f"recomputing {folder / PYLOCK} and its bundle with {resolver} ...")
    new = lock(
        resolution,
        old.input,
        resolver=resolver,
        index_url=request.index_url or old.input.index_url,
        offline=request.offline,
    )
    if new.resolver_version != old.resolver_version and new.resolver == old.resolver:
        notes.append(
            f"{new.resolver} is {new.resolver_version} here, the lock was made with "
            f"{old.resolver_version}; the comparison ignores that"
        )
        new = replace(new, resolver_version=old.resolver_version)
    if old.gpu is None and new.gpu is not None:
        # a lock made before envlock read the closure's CUDA: its packages decide
        notes.append(
            "the lock predates the CUDA facts of the whole closure; a new lock would "
            f"say: {driver_line(new)}"
        )
        new = replace(new, gpu=None)
    elif request.offline and old.gpu is not None and new.gpu is not None:
        notes.append(
            "the wheels' file lists were not read again (--offline): the lock's CUDA facts stand"
        )
        new = replace(new, gpu=old.gpu)
    changes = diff_locks(old, new)
    rows = compare_files(folder, bundle_files(new, options))
    changes += [_STATE_LINES[r["state"]].format(**r) for r in rows if r["state"] != "same"]
    regenerate = regenerate_command(old, str(folder))
    flags = _render_flags(options)
    if flags:
        regenerate += " " + shlex.join(flags)
    return CheckResult(
        folder,
        new,
        tuple(changes),
        tuple(rows),
        tuple(notes),
        regenerate,
        (recovered,) if recovered else (),
    )
