"""The bundle folder: every file ``envlock lock`` writes into DIR, made and written.

``lock_folder`` is ``envlock lock SPEC -o DIR`` once SPEC is resolved: the
lock, then pylock.toml, requirements.txt and the rendered bundle in one
all-or-nothing write. ``render_folder`` is ``envlock render DIR``: the
rendered files again from DIR's lock, DIR's render.json standing in for the
options not given. ``bundle_files`` is what ``lock`` writes and what
``lock --check`` (envlock.bundle.check) compares.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envlock.bundle.guard import check_output_folder
from envlock.bundle.manifest import (
    commit,
    locked_bundle,
    recover_bundle,
    refuse_foreign,
)
from envlock.door import carries_secret, redact
from envlock.errors import UsageError
from envlock.fsutil import sha256_bytes
from envlock.lock.core import check_requirements, lock
from envlock.lock.freeze import split_frozen
from envlock.lock.pylock import PYLOCK, pylock_text, read_lock
from envlock.lock.requirements import REQUIREMENTS, requirements_text
from envlock.lock.sdists import BUILD_CONSTRAINTS, build_constraints_text
from envlock.model import Constraints, Lock, LockedPackage, LockInput, Resolution
from envlock.readers import read_optional, read_text
from envlock.render import (
    EXECUTABLE,
    RENDER_JSON,
    BundleContext,
    RenderOptions,
    bundle_context,
    read_render_options,
    read_runtime,
    render_bundle,
)

Progress = Callable[[str], None]
RUNTIME = "runtime.json"  # kept by lock and render: an input of both


@dataclass(frozen=True)
class LockRequest:
    """``envlock lock SPEC -o DIR`` as typed values: resolve's constraints as asked
    (recorded whole in the lock's input), the pins, and how to lock and write."""

    constraints: Constraints
    output: Path
    with_requirements: tuple[str, ...] = ()  # --with REQ
    requirement_files: tuple[str, ...] = ()  # -r FILE
    resolver: str = "uv"
    index_url: str | None = None
    # --index / --route (envlock.index.routing.parse); URLs as given, recorded redacted
    indexes: tuple[tuple[str, str], ...] = ()
    routes: tuple[tuple[str, str], ...] = ()
    offline: bool = False
    render: RenderOptions = field(default_factory=RenderOptions)  # runtime: read from DIR
    force: bool = False  # overwrite files in DIR that envlock did not write
    upgrade: tuple[str, ...] = ()  # --upgrade-package NAME: the lock in DIR is kept but for these
    # more files of the lock, written with the bundle in the same switch (capture's left-out.json)
    extra_files: Callable[[Lock], dict[str, bytes]] | None = None

    @property
    def spec(self) -> str:
        return self.constraints.spec


@dataclass(frozen=True)
class LockedFolder:
    lock: Lock
    folder: Path
    files: tuple[str, ...]  # every file written, sorted
    digest: str  # sha256 hex of pylock.toml
    notes: tuple[str, ...] = ()  # what was done to finish an interrupted write first

    def to_dict(self) -> dict[str, Any]:
        """``envlock lock --json`` (docs/output.md)."""
        locked = self.lock
        return {
            "dir": str(self.folder),
            "lock_digest": f"sha256:{self.digest}",
            "resolver": locked.resolver,
            "resolver_version": locked.resolver_version,
            "top_requirements": list(locked.top_requirements),
            "resolution": locked.resolution.to_dict(),
            "input": locked.input.to_dict(),
            "gpu": locked.gpu.to_dict() if locked.gpu else None,
            "packages": [_package_json(p) for p in locked.packages],
            "files": list(self.files),
        }

    def text(self) -> str:
        """The packages table, the lock's facts, the files written, the why lines."""
        from envlock.lock.pylock import driver_line
        from envlock.output import table

        locked, out, r = self.lock, self.folder, self.lock.resolution
        rows = [
            [p.name, p.version, _files_column(p), _mb(max(w.size for w in p.files))]
            for p in locked.packages
        ]
        total = sum(max(w.size for w in p.files) for p in locked.packages)
        return (
            table(["package", "version", "wheels", "size"], rows)
            + f"\nlocked {len(locked.packages)} packages ({_mb(total)}) for {r.framework} "
            f"{r.version}, Python {r.python}, CUDA {r.cuda}, cuDNN {r.cudnn}, CUDA source "
            f"{r.cuda_source}, with {locked.resolver} {locked.resolver_version}\n"
            f"driver: {driver_line(locked).removeprefix('Needs an NVIDIA driver ')}\n"
            f"wrote {', '.join(self.files)} to {out}\n"
            f"install: pip install --require-hashes --no-deps -r {out / 'requirements.txt'}\n"
            + "".join(f"why: {reason}\n" for reason in r.cap_reasons)
        )


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _files_column(p: LockedPackage) -> str:
    """The table's wheels column: how many, or "sdist" for a package built from source."""
    return "sdist" if p.sdist is not None else str(len(p.wheels))


def _package_json(p: LockedPackage) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": p.name,
        "version": p.version,
        "wheels": [
            {"filename": w.filename, "url": w.url, "size": w.size, "sha256": w.sha256}
            for w in p.wheels
        ],
        **({"index": redact(p.index)} if p.index else {}),
    }
    if p.sdist is not None:
        s = p.sdist
        out["sdist"] = {"filename": s.filename, "url": s.url, "size": s.size, "sha256": s.sha256}
    return out


@dataclass(frozen=True)
class RenderedFolder:
    context: BundleContext
    files: tuple[dict[str, Any], ...]  # {"path", "bytes", "state": new | unchanged | updated}
    notes: tuple[str, ...]


def read_requirement_file(path: str, *, options: bool = False) -> list[str]:
    """Requirement lines of a -r FILE (comments, blanks and continuations handled).

    An option line (``-e PATH``, ``--index-url URL``) is refused, unless
    ``options``: then it is returned as it stands for the caller to judge
    (``envlock capture -r`` reads a freeze's ``-e`` lines)."""
    try:
        text = read_text(path, "-r", hint="check the file")  # strict: UsageError naming the file
    except FileNotFoundError:
        raise UsageError(f"-r {path}: no such file", hint="check the path") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"-r {path}: cannot read it ({e})", hint="check the file") from None
    out: list[str] = []
    joined = text.replace("\\\n", " ")
    for number, raw in enumerate(joined.splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-") and not options:
            raise UsageError(
                f"-r {path}: line {number}: {line.split()[0]} is not supported here",
                hint="list only requirements (name and version specifiers), one per line",
            )
        out.append(line)
    return out


def without_credentials(url: str) -> str:
    """The index URL as recorded in the lock: user and password are never written."""
    return redact(url)


def lock_input(
    request: LockRequest, resolution: Resolution, notes: list[str] | None = None
) -> LockInput:
    """What the lock records of the request, so it can be recomputed (--check).

    A -r file may be a ``pip freeze``: its framework line must agree with SPEC and
    is dropped, as are nvidia CUDA wheels (envlock.lock.freeze); ``notes`` gets why.
    """
    reqs = list(check_requirements(request.with_requirements, "--with"))
    for path in request.requirement_files:
        lines = check_requirements(read_requirement_file(path), f"-r {path}")
        frozen = split_frozen(
            lines,
            framework=resolution.framework,
            version=resolution.version,
            cuda_source=resolution.cuda_source,
            origin=f"-r {path}",
        )
        reqs += frozen.kept
        if notes is not None:
            notes += frozen.notes
    return LockInput(
        constraints=request.constraints,
        with_requirements=tuple(reqs),
        index_url=_recorded_index(request.index_url, notes),
        indexes=tuple((name, without_credentials(url)) for name, url in request.indexes),
        routes=request.routes,
    )


def _recorded_index(url: str | None, notes: list[str] | None) -> str | None:
    """The --index-url as the lock records it: without user and password; not at all
    when its query or fragment carries a credential (the URL would not work without it,
    and the Regenerate line must be a command that works when pasted)."""
    if not url:
        return None
    if carries_secret(url):
        if notes is not None:
            notes.append(
                f"--index-url {redact(url)} carries a credential in its query or fragment: "
                "the lock does not record it; `envlock lock --check` and the Regenerate line "
                "use your pip/uv configuration (give --index-url again to use it)"
            )
        return None
    return without_credentials(url)


def bundle_files(locked: Lock, options: RenderOptions) -> dict[str, bytes]:
    """Every file ``envlock lock`` writes into DIR, by name: the two lock files
    first, then the rendered bundle (``--check`` compares exactly these)."""
    lock_files = {
        PYLOCK: pylock_text(locked).encode("utf-8"),
        REQUIREMENTS: requirements_text(locked).encode("utf-8"),
    }
    if locked.build_constraints:  # the pinned build requirements of its sdists (#41)
        lock_files[BUILD_CONSTRAINTS] = build_constraints_text(locked).encode("utf-8")
    files = dict(lock_files)
    for name, data in render_bundle(locked, options, lock_files).items():
        files[name] = data.encode("utf-8") if isinstance(data, str) else data
    return files


def _prewarm(resolver: str, provisional: Lock, options: RenderOptions) -> None:
    """Work that does not need the locked packages, done while the resolver runs.

    The resolver is a child process, so this thread costs the lock nothing:
    the resolver's version is read, and a provisional bundle (no packages) is
    rendered and thrown away, so the template engine, the templates and the
    CUDA image data are loaded by the time the real lock arrives.
    """
    with contextlib.suppress(Exception):
        if resolver == "uv":
            from envlock.lock.uv import uv_version

            uv_version()
        render_bundle(provisional, options, {PYLOCK: b"", REQUIREMENTS: b""})


def _input_bytes(folder: Path, names: tuple[str, ...]) -> dict[str, bytes | None]:
    """The bytes of each file, None where it is absent; one that is there but
    cannot be read is exit 2 naming it."""
    return {name: read_optional(folder / name) for name in names}


def lock_folder(
    request: LockRequest, resolution: Resolution, progress: Progress | None = None
) -> LockedFolder:
    """Lock ``resolution`` (+ the request's pins) and write the whole bundle into
    ``request.output`` in one switch (envlock.bundle.manifest); an existing
    runtime.json there is kept. An interrupted earlier write into DIR is
    finished or rolled back first."""
    out = request.output
    check_output_folder(out, "-o")
    notes = [n for n in (recover_bundle(out),) if n]
    locking = lock_input(request, resolution, notes)
    if progress:
        progress(f"locking {resolution.framework} {resolution.version} with {request.resolver} ...")
    seen = _input_bytes(out, (RUNTIME,))
    options = replace(request.render, runtime=read_runtime(out))
    provisional = Lock(resolution, locking, (), request.resolver, "")
    warm = threading.Thread(
        target=_prewarm, args=(request.resolver, provisional, options), daemon=True
    )
    warm.start()
    previous = None
    if request.upgrade:
        if not (out / PYLOCK).is_file():
            raise UsageError(
                f"--upgrade-package needs the existing lock in {out}, and {out / PYLOCK} "
                "does not exist",
                hint=f"lock once without it: envlock lock '{request.spec}' -o {out}",
            )
        previous = read_lock(out)
    locked = lock(
        resolution,
        locking,
        resolver=request.resolver,
        index_url=request.index_url,
        offline=request.offline,
        previous=previous,
        upgrade=request.upgrade,
        indexes=request.indexes,
    )
    warm.join()
    files = {
        **bundle_files(locked, options),
        **(request.extra_files(locked) if request.extra_files else {}),
    }
    refuse_foreign(out, files, force=request.force, command="envlock lock")
    with locked_bundle(out, "-o") as held:
        if held.note:
            notes.append(held.note)
        if _input_bytes(out, (RUNTIME,)) != seen:  # another run changed it meanwhile
            files = {
                **bundle_files(locked, replace(options, runtime=read_runtime(out))),
                **(request.extra_files(locked) if request.extra_files else {}),
            }
        commit(
            out,
            files,
            modes={name: 0o755 for name in EXECUTABLE},
            force=request.force,
            command="envlock lock",
        )
    return LockedFolder(
        locked, out, tuple(sorted(files)), sha256_bytes(files[PYLOCK]), tuple(notes)
    )


def recorded_options(folder: Path, given: RenderOptions) -> tuple[RenderOptions, str | None]:
    """The render options for ``folder``: those given, else its render.json's,
    with its runtime.json kept; and a note when it has no render.json."""
    recorded = read_render_options(folder)
    note = None
    if recorded is None:
        recorded = {}
        note = (
            f"{folder} has no {RENDER_JSON} (bundles made before envlock recorded their "
            "render options): the options given here are used, the defaults for the rest; "
            "give --base-image, --base-digest, --ca-cert or --python-from again if the "
            "bundle was rendered with them"
        )
    return replace(given.over(recorded), runtime=read_runtime(folder)), note


def _lock_bytes(folder: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for name in (PYLOCK, REQUIREMENTS):
        path = folder / name
        data = read_optional(path)
        if data is None:
            raise UsageError(
                f"{path}: no such file; {folder} is not an envlock bundle",
                hint="make one with `envlock lock SPEC -o DIR`",
            )
        files[name] = data
    return files


def _render_plan(
    folder: Path, given: RenderOptions
) -> tuple[BundleContext, dict[str, bytes], dict[str, bytes], str | None]:
    """What ``envlock render`` writes: context, lock files, rendered files, note."""
    lock_files = _lock_bytes(folder)
    locked = read_lock(folder)
    options, note = recorded_options(folder, given)
    context = bundle_context(locked, options, lock_files)
    rendered = {
        rel: data.encode("utf-8") if isinstance(data, str) else data
        for rel, data in render_bundle(locked, options, lock_files).items()
    }
    return context, lock_files, rendered, note


def render_folder(folder: Path, given: RenderOptions, *, force: bool = False) -> RenderedFolder:
    """Render ``folder``'s bundle files again from its lock (no resolving) and
    write them in one switch; a failure leaves the folder as it was. An
    interrupted earlier write is finished or rolled back first."""
    check_output_folder(folder, "DIR")
    if not folder.is_dir():
        raise UsageError(
            f"{folder}: no such folder", hint="give the folder `envlock lock -o` wrote"
        )
    recovered = recover_bundle(folder)
    inputs = (PYLOCK, REQUIREMENTS, RENDER_JSON, RUNTIME)
    seen = _input_bytes(folder, inputs)
    # rendered before the lock is taken: bad input fails without touching DIR
    context, lock_files, files, note = _render_plan(folder, given)
    refuse_foreign(folder, {**lock_files, **files}, force=force, command="envlock render")
    with locked_bundle(folder) as held:
        if _input_bytes(folder, inputs) != seen:  # another run wrote DIR meanwhile
            context, lock_files, files, note = _render_plan(folder, given)
        # a folder holding only the lock files is being rendered for the first time
        notes = [n for n in (recovered, held.note) if n]
        if note and (folder / "Dockerfile").is_file():
            notes.append(note)
        written = commit(
            folder,
            {**lock_files, **files},
            modes={rel: 0o755 if rel in EXECUTABLE else None for rel in files},
            force=force,
            command="envlock render",
        )
    rows = [
        {"path": rel, "bytes": len(data), "state": written.states[rel]}
        for rel, data in files.items()
    ]
    return RenderedFolder(context, tuple(rows), tuple(notes))
