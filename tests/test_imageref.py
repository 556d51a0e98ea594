"""envlock.image.ref: the one image-reference parser."""

from __future__ import annotations

import pytest

from envlock.errors import UsageError
from envlock.image import ref as imageref

HEX = "a" * 64


@pytest.mark.parametrize(
    ("text", "repository", "registry", "path", "tag", "digest"),
    [
        ("envlock/tf", "envlock/tf", None, "envlock/tf", None, None),
        ("envlock/tf:2.15.1", "envlock/tf", None, "envlock/tf", "2.15.1", None),
        (
            f"127.0.0.1:5000/envlock/tf:2.15.1-py3.11@sha256:{HEX}",
            "127.0.0.1:5000/envlock/tf",
            "127.0.0.1:5000",
            "envlock/tf",
            "2.15.1-py3.11",
            f"sha256:{HEX}",
        ),
        ("localhost/tf@sha256:" + HEX, "localhost/tf", "localhost", "tf", None, f"sha256:{HEX}"),
        ("ghcr.io/org/img", "ghcr.io/org/img", "ghcr.io", "org/img", None, None),
        ("ubuntu:22.04", "ubuntu", None, "ubuntu", "22.04", None),
    ],
)
def test_parse_parts(text, repository, registry, path, tag, digest):
    ref = imageref.parse(text)
    assert (ref.repository, ref.registry, ref.path, ref.tag, ref.digest) == (
        repository,
        registry,
        path,
        tag,
        digest,
    )
    assert str(ref) == text


def test_pinned_and_with_digest():
    ref = imageref.parse("127.0.0.1:5000/envlock/tf:2.15.1")
    assert ref.pinned is None
    pinned = ref.with_digest(f"sha256:{HEX}")
    assert pinned.pinned == f"127.0.0.1:5000/envlock/tf@sha256:{HEX}"
    assert str(pinned.with_tag(None)) == pinned.pinned


@pytest.mark.parametrize(
    "text",
    ["", "Envlock/TF", "tf:", "tf@sha256:abc", f"tf@sha512:{HEX}", "tf:-bad", "/tf", "a//b"],
)
def test_bad_references_are_usage_errors(text):
    assert imageref.match(text) is None
    with pytest.raises(UsageError) as e:
        imageref.parse(text, "--push")
    assert "--push" in str(e.value) and "not a valid image reference" in str(e.value)
