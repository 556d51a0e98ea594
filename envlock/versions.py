"""Versions of the shapes the matrices hold, compared as PEP 440 compares them.

The matrices hold versions of few shapes: TensorFlow releases (``2.15.1``,
``2.15.0.post1``: the refresh keeps no pre-, dev- or local releases), and
dotted numbers (CUDA ``12.2``, cuDNN ``8.9``, drivers ``535.104.05``, Ubuntu
``22.04``, Python ``3.11``). ``Ver`` and ``release_key`` order exactly these
the way ``packaging.version.Version`` does, and ``simple_clauses`` /
``admits`` evaluate the plain specifiers people write (``==2.15``,
``>=2.14,<2.17``, ``~=2.13.0``, ``!=2.16.*``) against them as
``packaging.specifiers.SpecifierSet.contains`` does.

Why not packaging itself: ``envlock resolve`` must start within 2.5x of a
bare ``python -c pass`` (issue #2), and importing ``packaging.version`` (with
``typing``, which it needs) costs ~14 ms on a 2-core machine, ``specifiers``
~11 ms more: together more than the whole budget. packaging stays the
authority: every matrix file is validated with it when it is parsed (the
validated result is what the cache holds), any SPEC outside the plain shapes
goes through packaging's own requirement parser, and property tests
(tests/test_versions.py) check this module against packaging on generated
versions and specifiers.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Ver", "admits", "parse_release", "release_key", "simple_clauses"]

_OPERATORS = ("~=", "==", "!=", "<=", ">=", "<", ">")  # two-character ones first


def parse_release(text: str) -> tuple[int, ...] | None:
    """``"12.2"`` -> ``(12, 2)``; None unless ``text`` is ASCII digits joined by dots."""
    parts = text.split(".")
    for part in parts:
        if not part or not part.isascii() or not part.isdigit():
            return None
    return tuple([int(p) for p in parts])


def _strip_zeros(release: tuple[int, ...]) -> tuple[int, ...]:
    end = len(release)
    while end and release[end - 1] == 0:
        end -= 1
    return release[:end]


def release_key(text: str) -> tuple[int, ...]:
    """A sort key for a dotted-number version, ordered and equal as PEP 440
    orders release segments (``12.2 == 12.2.0``, ``535.104.05 > 535.54.03``).
    ValueError for any other text."""
    release = parse_release(text)
    if release is None:
        raise ValueError(f"not a dotted-number version: {text!r}")
    return _strip_zeros(release)


def _split_post(text: str) -> tuple[tuple[int, ...], int | None] | None:
    """(release, post) of ``N(.N)*`` or ``N(.N)*.postN``; None for anything else."""
    base, sep, post = text.partition(".post")
    release = parse_release(base)
    if release is None:
        return None
    if not sep:
        return release, None
    if not post or not post.isascii() or not post.isdigit():
        return None
    return release, int(post)


class Ver:
    """A final or post release in canonical form: ``2.15.1``, ``2.15.0.post1``.

    Ordered, equal and hashed as ``packaging.version.Version`` (``2.15 ==
    2.15.0 < 2.15.0.post1 < 2.15.1``); ``str()`` gives the text back. Other
    forms (pre-, dev-, local releases, epochs, leading zeros) are a ValueError:
    the matrices hold none, and validation turns that into a DataError."""

    __slots__ = ("_key", "_text", "post", "release")

    # the parts of packaging's Version interface that envlock reads
    is_prerelease = False
    is_devrelease = False
    pre = None
    dev = None
    local = None
    epoch = 0

    def __init__(self, text: str) -> None:
        parsed = _split_post(text)
        canonical = None
        if parsed is not None:
            canonical = ".".join([str(n) for n in parsed[0]])
            if parsed[1] is not None:
                canonical += f".post{parsed[1]}"
        if parsed is None or canonical != text:
            raise ValueError(f"not a final or post release in canonical form: {text!r}")
        self._text = text
        self.release: tuple[int, ...] = parsed[0]
        self.post: int | None = parsed[1]
        self._key = (_strip_zeros(parsed[0]), -1 if parsed[1] is None else parsed[1])

    @classmethod
    def restore(cls, text: str, release: tuple[int, ...], post: int | None) -> Ver:
        """A ``Ver`` from the parts of one made before (the matrix cache),
        without parsing ``text`` again."""
        obj = object.__new__(cls)
        obj._text = text
        obj.release = release
        obj.post = post
        obj._key = (_strip_zeros(release), -1 if post is None else post)
        return obj

    @property
    def key(self) -> tuple[tuple[int, ...], int]:
        return self._key

    @property
    def major(self) -> int:
        return self.release[0]

    @property
    def minor(self) -> int:
        return self.release[1] if len(self.release) > 1 else 0

    @property
    def micro(self) -> int:
        return self.release[2] if len(self.release) > 2 else 0

    @property
    def is_postrelease(self) -> bool:
        return self.post is not None

    @property
    def base_version(self) -> str:
        return ".".join(str(n) for n in self.release)

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"<Ver({self._text!r})>"

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Ver):
            return NotImplemented
        return self._key == other._key

    def __lt__(self, other: Ver) -> bool:
        if not isinstance(other, Ver):
            return NotImplemented
        return self._key < other._key

    def __le__(self, other: Ver) -> bool:
        if not isinstance(other, Ver):
            return NotImplemented
        return self._key <= other._key

    def __gt__(self, other: Ver) -> bool:
        if not isinstance(other, Ver):
            return NotImplemented
        return self._key > other._key

    def __ge__(self, other: Ver) -> bool:
        if not isinstance(other, Ver):
            return NotImplemented
        return self._key >= other._key

    def __reduce__(self) -> tuple[type[Ver], tuple[str]]:
        return (Ver, (self._text,))


def simple_clauses(text: str) -> tuple[tuple[str, str], ...] | None:
    """``">=2.14, <2.17"`` -> ``((">=", "2.14"), ("<", "2.17"))``: the clauses of
    a plain specifier, each an operator and a version of ASCII digits and dots
    (``.*`` after ``==``/``!=``), separated by commas, with spaces or tabs
    around. None for anything else (pre-/post-/dev-/local versions, ``===``,
    empty clauses, two clauses packaging counts as one): packaging decides
    those. ``""`` gives ``()``."""
    if not text.strip(" \t"):
        return ()
    out: list[tuple[str, str]] = []
    seen: set[tuple[str, tuple[int, ...], bool]] = set()
    for raw in text.split(","):
        clause = raw.strip(" \t")
        if clause.startswith("==="):
            return None
        for op in _OPERATORS:
            if clause.startswith(op):
                break
        else:
            return None
        version = clause[len(op) :].strip(" \t")
        wildcard = version.endswith(".*")
        if wildcard and op not in ("==", "!="):
            return None
        release = parse_release(version[:-2] if wildcard else version)
        if release is None or (op == "~=" and len(release) < 2):
            return None
        canonical = (op, release if wildcard or op == "~=" else _strip_zeros(release), wildcard)
        if canonical in seen:
            return None
        seen.add(canonical)
        out.append((op, version))
    return tuple(out)


def _prefix_match(prefix: tuple[int, ...], candidate: Ver) -> bool:
    padded = candidate.release + (0,) * max(0, len(prefix) - len(candidate.release))
    return padded[: len(prefix)] == prefix


def _admits_one(op: str, version: str, candidate: Ver) -> bool:
    if version.endswith(".*"):
        prefix = parse_release(version[:-2])
        assert prefix is not None
        matched = _prefix_match(prefix, candidate)
        return matched if op == "==" else not matched
    release = parse_release(version)
    assert release is not None
    spec = (_strip_zeros(release), -1)
    have = candidate.key
    if op == "==":
        return have == spec
    if op == "!=":
        return have != spec
    if op == "<=":
        return have <= spec
    if op == ">=":
        return have >= spec
    if op == "<":
        return have < spec
    if op == ">":
        # PEP 440: >V does not admit the post-releases of V
        return have > spec and not (candidate.post is not None and have[0] == spec[0])
    # ~=X.Y[.Z]: >= it, and == its release without the last part, as a prefix
    return have >= spec and _prefix_match(release[:-1], candidate)


def admits(clauses: Sequence[tuple[str, str]], candidate: Ver) -> bool:
    """Whether every clause admits ``candidate`` (``simple_clauses`` output;
    as ``SpecifierSet.contains(candidate, prereleases=True)``)."""
    return all(_admits_one(op, version, candidate) for op, version in clauses)
