"""Reading a PEP 691 page fast, with the same answers: the fast path for an absolute
file URL gives what ``urljoin`` gives (envlock.index.pep691._absolute), and a page
read lazily (``LazyFiles``, as a capture reads ~720 pages) holds the files
``parse_files`` makes, in the same order, all of them or one version's."""

from __future__ import annotations

import json
from collections.abc import Callable
from urllib.parse import urljoin

import orjson
import pytest
from fuzz_support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from envlock.index.pep691 import LazyFiles, _absolute, parse_files
from envlock.venv.leftout import _of, _version

BASES = ("https://files.example/simple/numpy/", "http://127.0.0.1:8080/simple/x/")


@pytest.mark.parametrize(
    "url",
    [
        "https://h/p/a-1.0-py3-none-any.whl",
        "http://h/a",
        "https://h:8080/a/b.whl",
        "https://user:pw@h/a",
        "https://h/a/../b",
        "https://h",
        "https://h/a?x",
        "https://h/a#sha256=1",
        "https://h/a;p",
        "https://[::1]/a",
        "https:///a",
        "HTTPS://h/a",
        "https://h/a b",
        "https://h/a\tb",
        "../../a.whl",
        "/a.whl",
        "a.whl",
        "//other/a.whl",
        "ftp://h/a",
    ],
)
@pytest.mark.parametrize("base", BASES)
def test_an_absolute_url_is_kept_and_any_other_joined_as_urljoin_does(base: str, url: str) -> None:
    assert _absolute(base, url) == urljoin(base, url)


_PARTS = st.sampled_from(
    ["https://", "http://", "HTTP://", "//", "/", "h", "host.example", ":8080", "@", "a.whl",
     "..", ".", "?", "#", ";", "[", "]", "\\", " ", "\t", "\n", "%2F", "x", "-", "ü"]
)  # fmt: skip


@settings(max_examples=scaled(400), deadline=None)
@given(st.lists(_PARTS, max_size=8).map("".join), st.sampled_from(BASES))
def test_any_url_gives_what_urljoin_gives(url: str, base: str) -> None:
    assert _outcome(_absolute, base, url) == _outcome(urljoin, base, url)


def _outcome(join: Callable[[str, str], str], base: str, url: str) -> str:
    try:
        return join(base, url)
    except ValueError as e:  # urljoin's own refusal ("Invalid IPv6 URL") stays the same
        return f"ValueError: {e}"


def test_parse_files_makes_relative_urls_absolute_and_keeps_absolute_ones() -> None:
    files = parse_files(
        [
            {"filename": "a-1.0.tar.gz", "url": "../../files/a-1.0.tar.gz", "hashes": {}},
            {"filename": "a-1.0-py3-none-any.whl", "url": "https://cdn.example/a.whl"},
        ],
        "https://idx.example/simple/a/",
    )
    assert [f.url for f in files] == [
        "https://idx.example/files/a-1.0.tar.gz",
        "https://cdn.example/a.whl",
    ]


_ENTRY = st.one_of(
    st.fixed_dictionaries(
        {
            "filename": st.sampled_from(
                ["a-1.0.tar.gz", "a-1.0.0.zip", "a-1.0-py3-none-any.whl", "a-2.0rc1.tar.gz",
                 "a-2.0-cp312-cp312-manylinux_2_28_x86_64.whl", "a-1.0-1-py3-none-any.whl",
                 "a.tar.gz", "README", "", "a-01.0-py3-none-any.whl"]
            ),
            "url": st.sampled_from(["f/a", "https://cdn.example/f/a", ""]),
        },
        optional={
            "hashes": st.sampled_from([{}, {"sha256": "AB"}, None]),
            "size": st.sampled_from([1, None, "2"]),
            "yanked": st.sampled_from([True, False, "reason"]),
            "requires-python": st.sampled_from([">=3.9", None]),
        },
    ),
    st.sampled_from([None, 3, "x", {"url": "u"}]),
)  # fmt: skip


@settings(max_examples=scaled(300), deadline=None)
@given(st.lists(_ENTRY, max_size=12))
def test_a_lazy_page_holds_what_parse_files_makes(entries: list[object]) -> None:
    base = "https://idx.example/simple/a/"
    eager = parse_files(list(entries), base)
    lazy = LazyFiles(list(entries), base)
    assert bool(lazy) == bool(eager)
    for version in {_version(f.filename) for f in eager} | {None}:
        want = [f for f in eager if _version(f.filename) == version]
        assert lazy.select(_version, version) == want
        if version is not None:
            assert _of(lazy, version) == want == _of(eager, version)
    assert list(lazy) == eager and len(lazy) == len(eager)
    assert lazy[:2] == eager[:2]


# JSON as a page may hold it: integers within 64 bits (a file's size; past them both
# read a float, below), finite floats, any text (escaped or not in the body)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _json_decoders(monkeypatch: pytest.MonkeyPatch) -> tuple[Callable[[bytes], object], ...]:
    """decode_json as it picks orjson, and as it picks json where orjson is not there."""
    import sys

    from envlock.index import pep691

    picked = []
    for gone in (False, True):
        monkeypatch.setattr(pep691, "_LOADS", None)
        if gone:
            monkeypatch.setitem(sys.modules, "orjson", None)  # `import orjson` fails
        pep691.decode_json(b"{}")
        picked.append(pep691._LOADS)
    monkeypatch.setattr(pep691, "_LOADS", None)
    assert picked[0] is orjson.loads
    assert getattr(picked[1], "func", None) is json.loads  # made strict as orjson
    return tuple(f for f in picked if f is not None)


def test_a_page_decodes_the_same_with_orjson_and_without(monkeypatch: pytest.MonkeyPatch) -> None:
    """decode_json takes orjson where it is installed and the standard library's json
    otherwise: the same value from every JSON body, ValueError from a broken one."""
    fast, plain = _json_decoders(monkeypatch)

    @settings(max_examples=scaled(300), deadline=None, database=None)
    @given(_JSON, st.booleans())
    def same(doc: object, ascii_only: bool) -> None:
        body = json.dumps(doc, ensure_ascii=ascii_only).encode("utf-8")
        assert fast(body) == plain(body) == doc

    same()
    for past in (2**64, -(2**63) - 1, 10**30):  # past 64 bits: a float both ways
        body = json.dumps({"size": past}).encode()
        assert fast(body) == plain(body) == {"size": float(past)}
    for broken in (b"", b"{", b'{"files": [}', b"\xff\xfe{}", b'{"a": 1} x', b"NaN"):
        for decode in (fast, plain):
            with pytest.raises(ValueError):
                decode(broken)
