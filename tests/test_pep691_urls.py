"""The file URLs of a PEP 691 page: the fast path for an absolute URL gives what
``urljoin`` gives (envlock.index.pep691._absolute; a capture reads ~370,000 of them)."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urljoin

import pytest
from fuzz_support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from envlock.index.pep691 import _absolute, parse_files

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
