"""envlock.versions against packaging, the authority it stands in for on the
start-up path: same order, same equality, same specifier answers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from envlock.versions import Ver, admits, parse_release, release_key, simple_clauses

# small numbers so that generated versions collide and prefixes overlap often
_num = st.integers(min_value=0, max_value=3)
_release = st.lists(_num, min_size=1, max_size=4).map(lambda ns: ".".join(map(str, ns)))
_ver_text = st.tuples(_release, st.one_of(st.none(), st.integers(0, 2))).map(
    lambda t: t[0] if t[1] is None else f"{t[0]}.post{t[1]}"
)
_padded = st.lists(st.integers(0, 120).map(lambda n: str(n).zfill(2)), min_size=1, max_size=4)


@settings(max_examples=400, deadline=None)
@given(_ver_text, _ver_text)
def test_ver_orders_as_packaging(a: str, b: str) -> None:
    va, vb = Ver(a), Ver(b)
    pa, pb = Version(a), Version(b)
    assert (va < vb, va == vb, va > vb, va <= vb, va >= vb) == (
        pa < pb,
        pa == pb,
        pa > pb,
        pa <= pb,
        pa >= pb,
    )
    assert (hash(va) == hash(vb)) or va != vb
    assert str(va) == str(pa) == a
    assert (va.major, va.minor, va.micro, va.release, va.post) == (
        pa.major,
        pa.minor,
        pa.micro,
        pa.release,
        pa.post,
    )
    assert va.is_postrelease == pa.is_postrelease
    assert va.base_version == pa.base_version


@settings(max_examples=300, deadline=None)
@given(_padded, _padded)
def test_release_key_orders_as_packaging(a: list[str], b: list[str]) -> None:
    ta, tb = ".".join(a), ".".join(b)
    ka, kb = release_key(ta), release_key(tb)
    pa, pb = Version(ta), Version(tb)
    assert (ka < kb, ka == kb, ka > kb) == (pa < pb, pa == pb, pa > pb)


@pytest.mark.parametrize(
    "text", ["", "2.", ".2", "2..1", "2.15rc1", "2.15.0-post1", "1!2.0", "2.15+local", "٣.1", "²"]
)
def test_release_key_refuses_other_shapes(text: str) -> None:
    with pytest.raises(ValueError):
        release_key(text)
    assert parse_release(text) is None


@pytest.mark.parametrize(
    "text", ["2.15.0rc1", "2.15.0.dev1", "2.15+cpu", "1!2.15", "02.15", "2.15.0.post01", "v2.15"]
)
def test_ver_refuses_what_the_matrix_never_holds(text: str) -> None:
    with pytest.raises(ValueError):
        Ver(text)


_op = st.sampled_from(["==", "!=", "<=", ">=", "<", ">", "~=", "===", "=", "=>"])
_space = st.sampled_from(["", " ", "\t", "  "])
_spec_version = st.one_of(
    _release,
    _release.map(lambda r: r + ".*"),
    _release.map(lambda r: r + ".post1"),
    _release.map(lambda r: r + "rc1"),
    _padded.map(".".join),
)
_clause = st.tuples(_space, _op, _space, _spec_version, _space).map("".join)
_clauses = st.lists(_clause, min_size=0, max_size=3).map(",".join)
_candidates = st.lists(_ver_text, min_size=1, max_size=8)


@settings(max_examples=800, deadline=None)
@given(_clauses, _candidates)
def test_simple_clauses_admit_as_specifierset(text: str, candidates: list[str]) -> None:
    clauses = simple_clauses(text)
    if clauses is None:
        return  # packaging decides (the caller falls back to it)
    try:
        spec = SpecifierSet(text)
    except InvalidSpecifier:
        pytest.fail(f"simple_clauses accepted {text!r}, packaging refuses it")
    assert len(spec) == len(clauses)
    assert sorted(op + v for op, v in clauses) == sorted(str(s) for s in spec)
    for c in candidates:
        assert admits(clauses, Ver(c)) == spec.contains(Version(c), prereleases=True), (text, c)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("==2.15", (("==", "2.15"),)),
        (" >=2.14 ,\t<2.17 ", ((">=", "2.14"), ("<", "2.17"))),
        ("~=2.13.0", (("~=", "2.13.0"),)),
        ("!=2.16.*", (("!=", "2.16.*"),)),
        ("", ()),
    ],
)
def test_simple_clauses_reads_plain_specifiers(text: str, expected: object) -> None:
    assert simple_clauses(text) == expected


@pytest.mark.parametrize(
    "text", ["===2.15", ">=2.14,", "~=2", ">=2.*", "==2.15rc1", ">=2.1,>=2.1.0", "==2.15 2"]
)
def test_simple_clauses_leaves_the_rest_to_packaging(text: str) -> None:
    assert simple_clauses(text) is None


def test_post_release_rules() -> None:
    post = Ver("2.15.0.post1")
    assert not admits(simple_clauses(">2.15.0") or (), post)  # PEP 440: >V excludes V.postN
    assert admits(simple_clauses(">=2.15.0") or (), post)
    assert not admits(simple_clauses("==2.15.0") or (), post)
    assert admits(simple_clauses("==2.15.*") or (), post)
    assert not admits(simple_clauses("<=2.15.0") or (), post)
    assert admits(simple_clauses("~=2.15.0") or (), post)
