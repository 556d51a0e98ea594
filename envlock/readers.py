"""One strict reader per file format: every defect is one clear error.

Every file envlock reads from the user or from a bundle goes through one of
these, so a missing file, a folder, a permission problem, bytes that are not
UTF-8, a syntax error, a lone surrogate, a number too long to be a number or
a document nested too deeply is one ``EnvlockError`` naming the file and the
problem (exit 2 unless the caller gives another error class), never a
traceback.

- ``read_bytes(path, what)``: a regular file's bytes, bounded in size
  (``follow=False``: a link at the path is refused, not read through).
- ``read_optional(path, what)``: the same, or None when nothing is there; a file
  that is there but cannot be read is an error, never None (absent is not
  unreadable).
- ``read_member(zf, name, label)``: a zip member's bytes, bounded by its declared
  and its actual size.
- ``read_text(path, what)``: strict UTF-8 text.
- ``read_toml(path, what)``: a TOML document (tomllib), errors with line and column.
- ``read_json(path, what)``: a strict JSON document (see ``parse_json``).

``what`` says which file it is in messages ("-r", "--peaks", "runtime
settings"); it is written before the path. ``parse_json`` and ``parse_toml``
check text already in memory the same way.

``decode_json`` is the one strict JSON decoder; ``parse_json`` and the
report reader (``envlock.report.strict``, which adds the signed 64-bit bound on
integers) both go through it, so its refusals are ``JSONDefect`` with the
problem alone and the caller names the document.
"""

from __future__ import annotations

import json
import math
import os
import stat
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from envlock.errors import EnvlockError, UsageError

if TYPE_CHECKING:
    import zipfile

MAX_BYTES = 64 * 1024 * 1024  # no input envlock reads is near this
MAX_JSON_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64  # objects and arrays inside each other
MAX_NUMBER_CHARS = 100  # a JSON number longer than this is not a setting
MAX_SHOWN = 200  # characters of a value written into a message

ErrorClass = Callable[..., EnvlockError]


def shown(value: object, limit: int = MAX_SHOWN) -> str:
    """``value`` for a message: as it is when plain printable text, else its
    repr (control characters, lone surrogates), cut to ``limit`` characters."""
    text = str(value)
    if not text.isprintable() or _has_surrogate(text):
        text = repr(text)
    if len(text) > limit:
        text = text[: limit - 3] + f"... ({len(str(value))} characters)"
    return text


def quoted(value: str, limit: int = 80) -> str:
    """``repr(value)`` for a message, cut to about ``limit`` characters."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value)} characters)"


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _label(path: object, what: str) -> str:
    return f"{what} {shown(path)}" if what else shown(path)


def read_bytes(
    path: str | os.PathLike[str],
    what: str = "",
    *,
    limit: int = MAX_BYTES,
    hint: str | None = None,
    error: ErrorClass = UsageError,
    follow: bool = True,
) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them. With
    ``follow=False`` a symbolic link at ``path`` is refused, not followed."""
    data = read_optional(path, what, limit=limit, hint=hint, error=error, follow=follow)
    if data is None:
        raise error(f"{_label(path, what)}: no such file", hint=hint or "check the path")
    return data


def read_optional(
    path: str | os.PathLike[str],
    what: str = "",
    *,
    limit: int = MAX_BYTES,
    hint: str | None = None,
    error: ErrorClass = UsageError,
    follow: bool = True,
) -> bytes | None:
    """The bytes of the regular file ``path`` as ``read_bytes`` reads them, or None
    when nothing is there. Absent and unreadable are different results: a file
    that is there but is a folder, a FIFO, a device, a link (``follow=False``) or
    a dangling link, over ``limit``, or not readable is ``error`` naming it, never
    None. The file is opened without blocking and checked on its open descriptor,
    so a FIFO put in its place between a check and the read is never read."""
    label = _label(path, what)
    hint = hint or "check the path"
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            if os.path.islink(path):
                raise error(
                    f"{label}: a symbolic link to {shown(os.readlink(path))}, which does not exist",
                    hint=hint,
                ) from None
            return None
        except OSError:
            if not follow and os.path.islink(path):  # ELOOP under O_NOFOLLOW
                raise error(
                    f"{label}: a symbolic link (to {shown(os.readlink(path))}); envlock does "
                    "not read through it",
                    hint=hint,
                ) from None
            raise
        try:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                raise error(f"{label}: is a folder, not a file", hint=hint)
            if not stat.S_ISREG(info.st_mode):
                raise error(f"{label}: not a regular file ({_kind(info.st_mode)})", hint=hint)
            if info.st_size > limit:
                raise error(
                    f"{label}: {info.st_size} bytes, more than the {limit} allowed", hint=hint
                )
            with os.fdopen(os.dup(fd), "rb") as f:
                data = read_capped(f, limit)
        finally:
            os.close(fd)
    except PermissionError:
        raise error(f"{label}: permission denied", hint=hint) from None
    except IsADirectoryError:
        raise error(f"{label}: is a folder, not a file", hint=hint) from None
    except OSError as e:
        raise error(f"{label}: cannot read it ({e.strerror or e})", hint=hint) from None
    except ValueError:  # a NUL byte or a lone surrogate in the path
        raise error(f"{label}: not a valid path", hint=hint) from None
    if len(data) > limit:
        raise error(f"{label}: more than the {limit} bytes allowed", hint=hint)
    return data


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a file"


MAX_MEMBER_BYTES = 4 * 1024 * 1024  # METADATA, build_info.py, a CUDA header: a few KB each


def read_member(
    zf: zipfile.ZipFile,
    name: str,
    label: str,
    *,
    limit: int = MAX_MEMBER_BYTES,
    hint: str | None = None,
    error: ErrorClass = UsageError,
) -> bytes:
    """The bytes of the member ``name`` of an open zip, at most ``limit`` of them:
    refused when its declared size is larger, and read in a bounded stream, so a
    member whose compressed data inflates past its declared size (a zip bomb)
    stops at ``limit`` + 1 bytes instead of filling memory. zipfile's own
    errors (a CRC mismatch, data cut short) are the caller's to name."""
    info = zf.getinfo(name)
    hint = hint or "check the file"
    if info.file_size > limit:
        raise error(
            f"{label}: {name} is {info.file_size} bytes, more than the {limit} allowed",
            hint=hint,
        )
    with zf.open(info) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise error(
            f"{label}: {name} inflates past the {limit} bytes allowed (it says {info.file_size})",
            hint=hint,
        )
    return data


def read_capped(f: Any, limit: int) -> bytes:
    """At most ``limit`` + 1 bytes of the binary file object ``f``, read in chunks of
    1 MiB: ``f.read(limit + 1)`` allocates the whole ``limit`` up front (64 MiB
    for every small file: tests/test_bounded_reads_fuzz.py found it)."""
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        chunk = f.read(min(1 << 20, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def decode_text(
    data: bytes, label: str, *, hint: str | None = None, error: ErrorClass = UsageError
) -> str:
    """``data`` as strict UTF-8 (a lone surrogate's bytes are refused too)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise error(
            f"{label}: not UTF-8 text (byte {e.start}, line {line})",
            hint=hint or "save the file as UTF-8",
        ) from None


def read_text(
    path: str | os.PathLike[str],
    what: str = "",
    *,
    limit: int = MAX_BYTES,
    hint: str | None = None,
    error: ErrorClass = UsageError,
    follow: bool = True,
) -> str:
    """The file's text, strict UTF-8."""
    data = read_bytes(path, what, limit=limit, hint=hint, error=error, follow=follow)
    return decode_text(data, _label(path, what), hint=hint, error=error)


def parse_toml(
    text: str, label: str, *, hint: str | None = None, error: ErrorClass = UsageError
) -> dict[str, Any]:
    """A TOML document; a syntax error names the line and column."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.9/3.10
        import tomli as tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise error(f"{label}: not valid TOML: {e}", hint=hint or "fix the file") from None
    except (ValueError, RecursionError) as e:
        # an integer of thousands of digits; arrays nested thousands deep
        problem = "nested too deeply" if isinstance(e, RecursionError) else "a number too long"
        raise error(f"{label}: not valid TOML: {problem}", hint=hint or "fix the file") from None


def read_toml(
    path: str | os.PathLike[str],
    what: str = "",
    *,
    hint: str | None = None,
    error: ErrorClass = UsageError,
) -> dict[str, Any]:
    """The TOML document in the file."""
    text = read_text(path, what, hint=hint, error=error)
    return parse_toml(text, _label(path, what), hint=hint, error=error)


class JSONDefect(ValueError):
    """A document that is not strict JSON (or breaks a bound); the message says
    what and where, without naming the file (the caller does)."""


def _constant(name: str) -> Any:
    raise JSONDefect(f"{name} is not a JSON number")


def _integer(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise JSONDefect(f"a number of {len(text)} digits")
    return int(text)


def _bounded_integer(bits: int) -> Callable[[str], int]:
    """An integer hook refusing integers outside the signed ``bits``-bit range."""
    limit = 1 << (bits - 1)
    most = len(str(limit))

    def parse(text: str) -> int:
        digits = len(text) - text.startswith("-")
        if digits > most or not -limit <= int(text) < limit:
            short = text if len(text) <= 24 else f"{text[:12]}...({digits} digits)"
            raise JSONDefect(f"the integer {short} is outside the signed {bits}-bit range")
        return int(text)

    return parse


def _float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise JSONDefect(f"a number of {len(text)} characters")
    value = float(text)
    if not math.isfinite(value):
        short = text if len(text) <= 24 else text[:24] + "..."
        raise JSONDefect(f"the number {short} is not a finite number")
    return value


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise JSONDefect(f"duplicate key {quoted(key)} in one object")
        out[key] = value
    return out


_Where = tuple[Any, Any] | None  # (the parent's _Where, key or index); None at the top


def _at(where: _Where) -> str:
    """`` at a.b[2]`` for a place in a document ("" at the top level)."""
    parts: list[str] = []
    while where is not None:
        where, key = where
        parts.append(f"[{key}]" if isinstance(key, int) else "." + shown(key, 40))
    path = "".join(reversed(parts)).lstrip(".")
    return f" at {shown(path)}" if path else ""


def check_tree(doc: Any, max_depth: int = MAX_DEPTH) -> None:
    """Raise JSONDefect for a document (decoded or built in memory) nested more
    than ``max_depth`` levels of objects and arrays or holding a lone surrogate."""
    stack: list[tuple[Any, int, _Where]] = [(doc, 0, None)]
    while stack:
        value, depth, where = stack.pop()
        if isinstance(value, str):
            if not value.isascii() and _has_surrogate(value):
                raise JSONDefect(f"a lone surrogate in the string {shown(value)}{_at(where)}")
        elif isinstance(value, (dict, list)):
            if depth >= max_depth:
                raise JSONDefect(f"nested more than {max_depth} levels deep")
            if isinstance(value, dict):
                for key, item in value.items():
                    if isinstance(key, str) and not key.isascii() and _has_surrogate(key):
                        raise JSONDefect(f"a lone surrogate in the key {shown(key)}{_at(where)}")
                    stack.append((item, depth + 1, (where, key)))
            else:
                stack.extend((item, depth + 1, (where, i)) for i, item in enumerate(value))


def decode_json(text: str, *, max_depth: int = MAX_DEPTH, int_bits: int | None = None) -> Any:
    """The one strict JSON decoder: no byte-order mark, no NaN or Infinity (nor a
    number that overflows to infinity), no number longer than ``MAX_NUMBER_CHARS``,
    integers inside the signed ``int_bits``-bit range when given, no key twice in
    one object, no lone surrogate, at most ``max_depth`` levels of objects and
    arrays. Raises JSONDefect saying what is wrong."""
    if text.startswith("\ufeff"):
        raise JSONDefect("starts with a byte-order mark")
    try:
        doc = json.loads(
            text,
            parse_constant=_constant,
            parse_int=_integer if int_bits is None else _bounded_integer(int_bits),
            parse_float=_float,
            object_pairs_hook=_pairs,
        )
    except JSONDefect:
        raise
    except json.JSONDecodeError as e:
        raise JSONDefect(f"{e.msg} (line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise JSONDefect(f"nested more than {max_depth} levels deep") from None
    except ValueError as e:  # belt and braces: any other refusal of the json module
        raise JSONDefect(str(e)) from None
    check_tree(doc, max_depth)
    return doc


def parse_json(
    text: str | bytes,
    label: str,
    *,
    limit: int = MAX_JSON_BYTES,
    max_depth: int = MAX_DEPTH,
    hint: str | None = None,
    error: ErrorClass = UsageError,
) -> Any:
    """A strict JSON document (see ``decode_json``): UTF-8, at most ``limit``
    bytes; any defect is one ``error`` naming ``label``."""
    hint = hint or "fix the file"
    if isinstance(text, bytes):
        text = decode_text(text, label, hint=hint, error=error)
    if len(text) > limit:
        raise error(f"{label}: more than the {limit} bytes allowed", hint=hint)
    try:
        return decode_json(text, max_depth=max_depth)
    except JSONDefect as e:
        raise error(f"{label}: not valid JSON: {e}", hint=hint) from None


def read_json(
    path: str | os.PathLike[str],
    what: str = "",
    *,
    limit: int = MAX_JSON_BYTES,
    max_depth: int = MAX_DEPTH,
    hint: str | None = None,
    error: ErrorClass = UsageError,
    follow: bool = True,
) -> Any:
    """The strict JSON document in the file (see ``parse_json``)."""
    data = read_bytes(path, what, limit=limit, hint=hint, error=error, follow=follow)
    return parse_json(
        data, _label(path, what), limit=limit, max_depth=max_depth, hint=hint, error=error
    )


def json_from_output(
    text: str,
    label: str,
    *,
    limit: int = MAX_JSON_BYTES,
    hint: str | None = None,
    error: ErrorClass = UsageError,
) -> Any:
    """The JSON document a program printed as its last JSON line: lines before it
    (an interpreter's start-up banner, a sitecustomize's greeting) and after it
    that are not a JSON object or array are skipped. Bounded: only the last
    ``limit`` characters are looked at. None printed is one ``error`` naming
    ``label`` and the last line it printed."""
    lines = text[-limit:].splitlines()
    for line in reversed(lines):
        line = line.strip()
        if line[:1] in ("{", "["):
            try:
                return decode_json(line)
            except JSONDefect:
                continue
    last = next((line for line in reversed(lines) if line.strip()), "no output")
    raise error(f"{label}: printed no JSON document (its last line: {shown(last)})", hint=hint)


def exists(path: str | os.PathLike[str]) -> bool:
    """Whether something is at ``path`` (False for a path that cannot be one)."""
    try:
        return os.path.exists(path)
    except (OSError, ValueError):
        return False
