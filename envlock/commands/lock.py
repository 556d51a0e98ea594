"""envlock lock: resolve, then pin the whole closure with hashes, and render the bundle.

``envlock lock SPEC -o DIR`` writes pylock.toml, requirements.txt and the
rendered bundle files with one all-or-nothing write; ``envlock lock --check
DIR`` recomputes all of those from DIR's recorded input and render options,
writes nothing, and exits 1 when any of them would change.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock.errors import UsageError

if TYPE_CHECKING:
    from envlock.model import Lock, LockInput, Resolution
    from envlock.render import RenderOptions


def register(sub: Any) -> None:
    from envlock.commands.resolve import add_resolve_arguments
    from envlock.render import add_render_arguments

    p = sub.add_parser(
        "lock",
        help="pin the whole dependency closure with hashes and write the bundle",
        description="Resolve SPEC as 'envlock resolve' does, then lock the full dependency "
        "closure for the target (Linux x86_64 manylinux, the resolved CPython minor) with "
        "hashes: DIR/pylock.toml (PEP 751), DIR/requirements.txt and the rendered bundle. "
        "Exit 2 when the pins conflict, 3 when the index cannot be reached.",
    )
    add_resolve_arguments(p)
    _optional_spec(p)
    p.add_argument(
        "--with",
        dest="with_requirements",
        action="append",
        default=[],
        metavar="REQ",
        help="also pin this requirement (repeatable), e.g. --with numpy==1.26.4",
    )
    p.add_argument(
        "-r",
        "--requirement",
        dest="requirement_files",
        action="append",
        default=[],
        metavar="FILE",
        help="also pin the requirements listed in FILE (one per line)",
    )
    p.add_argument(
        "--resolver",
        choices=("uv", "pip"),
        default=None,
        help="resolver engine (default uv; pip is the fallback; --check: the recorded one)",
    )
    p.add_argument(
        "--index-url",
        metavar="URL",
        help="simple-API index (default: the pip/uv configuration of this machine)",
    )
    p.add_argument(
        "--offline",
        action="store_true",
        help="use only uv's cached index metadata (no network)",
    )
    p.add_argument("-o", "--output", metavar="DIR", help="bundle folder to write")
    p.add_argument(
        "--check",
        metavar="DIR",
        help="recompute every file lock writes into DIR (lock files and bundle) from its "
        "recorded input and render options; write nothing; exit 1 if any would change",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_render_arguments(p)
    p.set_defaults(func=run)


def _optional_spec(parser: argparse.ArgumentParser) -> None:
    """SPEC is required for a lock, not for --check DIR: checked in run()."""
    for action in parser._actions:
        if action.dest == "spec" and not action.option_strings:
            action.nargs = "?"
            action.required = False
            action.default = None


def read_requirement_file(path: str) -> list[str]:
    """Requirement lines of a -r FILE (comments, blanks and continuations handled)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
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
        if line.startswith("-"):
            raise UsageError(
                f"-r {path}: line {number}: {line.split()[0]} is not supported here",
                hint="list only requirements (name and version specifiers), one per line",
            )
        out.append(line)
    return out


def _lock_input(args: argparse.Namespace, constraints: Any, resolution: Resolution) -> LockInput:
    from envlock.lock import check_requirements
    from envlock.model import LockInput

    reqs = list(check_requirements(args.with_requirements, "--with"))
    for path in args.requirement_files:
        reqs += check_requirements(read_requirement_file(path), f"-r {path}")

    def given(name: str) -> str | None:
        value = getattr(constraints, name, None)
        return str(value) if value not in (None, "") else None

    return LockInput(
        spec=args.spec,
        with_requirements=tuple(reqs),
        python=given("python"),
        cuda=given("cuda"),
        cudnn=given("cudnn"),
        driver=given("driver"),
        os=given("os"),
        cuda_source=resolution.cuda_source,
        index_url=_without_credentials(args.index_url) if args.index_url else None,
    )


def _without_credentials(url: str) -> str:
    """The index URL as recorded in the lock: user and password are never written."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=host))


def _resolve_input(lock_input: LockInput) -> Resolution:
    """Resolve again from a recorded LockInput (for --check)."""
    from envlock.commands.resolve import add_resolve_arguments, constraints_from_args
    from envlock.lock.pylock import resolve_argv
    from envlock.resolve import resolve

    parser = argparse.ArgumentParser(add_help=False)
    add_resolve_arguments(parser)
    args, _ = parser.parse_known_args(resolve_argv(lock_input))
    return resolve(constraints_from_args(args))


def _progress(message: str) -> None:
    from envlock.output import stderr_is_tty

    if stderr_is_tty():
        sys.stderr.write(message + "\n")
        sys.stderr.flush()


def _prewarm(resolver: str, provisional: Lock, options: Any) -> None:
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
        from envlock.render import render_bundle

        render_bundle(provisional, options, {"pylock.toml": b"", "requirements.txt": b""})


def bundle_files(locked: Lock, options: RenderOptions) -> dict[str, bytes]:
    """Every file ``envlock lock`` writes into DIR, by name: the two lock files
    first, then the rendered bundle (``--check`` compares exactly these)."""
    from envlock.lock import PYLOCK, REQUIREMENTS, pylock_text, requirements_text
    from envlock.render import render_bundle

    pylock = pylock_text(locked).encode("utf-8")
    requirements = requirements_text(locked).encode("utf-8")
    lock_files = {PYLOCK: pylock, REQUIREMENTS: requirements}
    files: dict[str, bytes] = dict(lock_files)
    for name, data in render_bundle(locked, options, lock_files).items():
        files[name] = data.encode("utf-8") if isinstance(data, str) else data
    return files


def run(args: argparse.Namespace) -> int:
    if args.check:
        if args.output:
            raise UsageError(
                "give -o DIR or --check DIR, not both", hint="envlock lock --check DIR"
            )
        return check(args)
    if not args.spec:
        raise UsageError("what to lock is missing", hint="envlock lock 'tensorflow==2.15' -o DIR")
    if not args.output:
        raise UsageError("no output folder", hint=f"envlock lock '{args.spec}' -o DIR")
    from envlock.commands.resolve import constraints_from_args
    from envlock.fsutil import sha256_bytes, write_files
    from envlock.lock import PYLOCK, lock
    from envlock.model import Lock
    from envlock.render import EXECUTABLE, options_from_args
    from envlock.resolve import resolve

    constraints = constraints_from_args(args)
    resolution = resolve(constraints)
    lock_input = _lock_input(args, constraints, resolution)
    resolver = args.resolver or "uv"
    _progress(f"locking {resolution.framework} {resolution.version} with {resolver} ...")
    options = options_from_args(args)
    provisional = Lock(resolution, lock_input, (), resolver, "")
    warm = threading.Thread(target=_prewarm, args=(resolver, provisional, options), daemon=True)
    warm.start()
    locked = lock(
        resolution, lock_input, resolver=resolver, index_url=args.index_url, offline=args.offline
    )
    warm.join()
    files = bundle_files(locked, options)
    out = Path(args.output)
    write_files(out, files, modes={name: 0o755 for name in EXECUTABLE})
    _print_lock(args, locked, out, sorted(files), sha256_bytes(files[PYLOCK]))
    return 0


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _print_lock(
    args: argparse.Namespace, locked: Lock, out: Path, files: list[str], digest: str
) -> None:
    from envlock.output import emit_json, table

    r = locked.resolution
    if args.json:
        emit_json(
            {
                "dir": str(out),
                "lock_digest": f"sha256:{digest}",
                "resolver": locked.resolver,
                "resolver_version": locked.resolver_version,
                "top_requirements": list(locked.top_requirements),
                "resolution": r.to_dict(),
                "input": locked.input.to_dict(),
                "packages": [_package_json(p) for p in locked.packages],
                "files": files,
            }
        )
        return
    rows = [
        [p.name, p.version, str(len(p.wheels)), _mb(max(w.size for w in p.wheels))]
        for p in locked.packages
    ]
    sys.stdout.write(table(["package", "version", "wheels", "size"], rows))
    total = sum(max(w.size for w in p.wheels) for p in locked.packages)
    sys.stdout.write(
        f"\nlocked {len(locked.packages)} packages ({_mb(total)}) for {r.framework} {r.version}, "
        f"Python {r.python}, CUDA {r.cuda}, cuDNN {r.cudnn}, CUDA source {r.cuda_source}, "
        f"with {locked.resolver} {locked.resolver_version}\n"
        f"wrote {', '.join(files)} to {out}\n"
        f"install: pip install --require-hashes --no-deps -r {out / 'requirements.txt'}\n"
    )


def _package_json(p: Any) -> dict[str, Any]:
    return {
        "name": p.name,
        "version": p.version,
        "wheels": [
            {"filename": w.filename, "url": w.url, "size": w.size, "sha256": w.sha256}
            for w in p.wheels
        ],
    }


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
            elif {w.sha256 for w in a.wheels} != {w.sha256 for w in b.wheels}:
                changes.append(f"~ {name} {a.version}: wheels or hashes differ from the index")
            elif a.wheels != b.wheels:
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
    return changes


# The files that carry the bundle's `envlock render . OPTIONS` line, in the
# order a tie between them is settled.
_REGENERATE_CARRIERS = ("Dockerfile", "bootstrap.sh", "README.md")
_REGENERATE = "envlock render ."


def _regenerate_options(text: str) -> tuple[tuple[str, str | None], ...] | None:
    """The render options of the first `envlock render . ...` line of ``text``."""
    import shlex

    from envlock.render import add_render_arguments

    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    add_render_arguments(parser)
    parser.add_argument("--os")
    for line in text.splitlines():
        at = line.find(_REGENERATE)
        if at < 0:
            continue
        try:
            words = shlex.split(line[at + len(_REGENERATE) :])
            parsed, rest = parser.parse_known_args(words)
        except (ValueError, argparse.ArgumentError, SystemExit):
            continue  # not a command line (an example in prose, a hand edit)
        if rest:
            continue
        return tuple(sorted(vars(parsed).items()))
    return None


def recorded_render_options(folder: Path) -> dict[str, str | None]:
    """The render options a bundle was made with, read back from the
    regenerate line its Dockerfile, bootstrap.sh and README.md carry.

    The value most of those files agree on wins, so one hand-edited file does
    not decide how the others are compared. No such line: the defaults.
    """
    votes: dict[tuple[tuple[str, str | None], ...], int] = {}
    for name in _REGENERATE_CARRIERS:
        try:
            text = (folder / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        found = _regenerate_options(text)
        if found is not None:
            votes[found] = votes.get(found, 0) + 1
    if not votes:
        return {}
    best = max(votes.values())
    return dict(next(found for found, count in votes.items() if count == best))


def _check_options(args: argparse.Namespace, folder: Path, old: Lock) -> RenderOptions:
    """The render options `envlock lock` would use for DIR: those given on this
    command line, else those the bundle was rendered with; DIR's runtime.json."""
    from envlock.render import RenderOptions, read_runtime

    recorded = recorded_render_options(folder)

    def pick(name: str) -> str | None:
        given = getattr(args, name, None)
        return str(given) if given else recorded.get(name)

    ca_cert = pick("ca_cert")
    if ca_cert and not args.ca_cert and not Path(ca_cert).expanduser().is_file():
        raise UsageError(
            f"{folder} was rendered with --ca-cert {ca_cert}, which is not readable here",
            hint=f"give the CA file again: envlock lock --check {folder} --ca-cert FILE",
        )
    return RenderOptions(
        base_image=pick("base_image"),
        base_digest=pick("base_digest"),
        os=old.input.os,
        ca_cert=ca_cert,
        python_from=pick("python_from"),
        runtime=read_runtime(folder),
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


def compare_files(folder: Path, files: dict[str, bytes]) -> list[dict[str, str]]:
    """Each file lock would write, against DIR: same, differs, missing, or (for
    bootstrap.sh) not executable. Files in DIR that lock does not write are not
    looked at."""
    import os

    from envlock.render import EXECUTABLE

    rows: list[dict[str, str]] = []
    for name, data in files.items():
        path = folder / name
        try:
            current = path.read_bytes()
        except OSError:
            current = None
        if current is None:
            state = "missing"
        elif current != data:
            state = "differs"
        elif name in EXECUTABLE and not os.stat(path).st_mode & 0o111:
            state = "not executable"
        else:
            state = "same"
        rows.append({"path": name, "state": state})
    return rows


_STATE_LINES = {
    "missing": "! {path} missing",
    "differs": "! {path} would be rewritten",
    "not executable": "! {path} is not executable",
}


def check(args: argparse.Namespace) -> int:
    import shlex
    from dataclasses import replace

    from envlock.lock import PYLOCK, lock, read_lock
    from envlock.lock.pylock import regenerate_command
    from envlock.output import emit_json

    folder = Path(args.check)
    old = read_lock(folder)
    if args.spec:
        raise UsageError(
            f"--check recomputes from {folder}'s recorded input; SPEC {args.spec!r} is not used",
            hint=f"envlock lock --check {folder}",
        )
    options = _check_options(args, folder, old)
    resolver = args.resolver or old.resolver or "uv"
    resolution = _resolve_input(old.input)
    _progress(f"recomputing {folder / PYLOCK} and its bundle with {resolver} ...")
    new = lock(
        resolution,
        old.input,
        resolver=resolver,
        index_url=args.index_url or old.input.index_url,
        offline=args.offline,
    )
    notes: list[str] = []
    if new.resolver_version != old.resolver_version and new.resolver == old.resolver:
        notes.append(
            f"{new.resolver} is {new.resolver_version} here, the lock was made with "
            f"{old.resolver_version}; the comparison ignores that"
        )
        new = replace(new, resolver_version=old.resolver_version)
    changes = diff_locks(old, new)
    rows = compare_files(folder, bundle_files(new, options))
    changes += [_STATE_LINES[r["state"]].format(**r) for r in rows if r["state"] != "same"]
    ok = not changes
    regenerate = regenerate_command(old, str(folder))
    flags = _render_flags(options)
    if flags:
        regenerate += " " + shlex.join(flags)
    if args.json:
        emit_json(
            {
                "dir": str(folder),
                "ok": ok,
                "changes": changes,
                "files": rows,
                "notes": notes,
                "regenerate": regenerate,
            }
        )
    else:
        for note in notes:
            sys.stdout.write(f"note: {note}\n")
        if ok:
            sys.stdout.write(
                f"{folder}: the lock is current ({len(new.packages)} packages, "
                f"{new.resolution.framework} {new.resolution.version}); "
                f"all {len(rows)} files lock writes match\n"
            )
        else:
            sys.stdout.write(f"{folder}: `envlock lock` would change the bundle:\n")
            for line in changes:
                sys.stdout.write(f"  {line}\n")
            sys.stdout.write(f"  regenerate: {regenerate}\n")
    return 0 if ok else 1
