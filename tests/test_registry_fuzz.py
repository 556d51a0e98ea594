"""A short fuzz run over the registry client (issue #21): random statuses, headers,
manifests and bodies from tests/hostile_registry.py's registry against `verify
--from-registry` and `report attach`: every run ends with exit 0-3 and no traceback."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envlock.cli import main
from envlock.report import envelope_bytes, sign_result
from tests.fuzz_support import scaled
from tests.hostile_registry import DIGEST, REPO, Answer, HostileRegistry
from tests.report_support import make_keys, smoke_result

DSSE = "application/vnd.dsse.envelope.v1+json"
STATUSES = st.sampled_from([200, 201, 202, 204, 301, 400, 401, 403, 404, 429, 500, 503])
HEADERS = st.dictionaries(
    st.sampled_from(["WWW-Authenticate", "Retry-After", "Location", "Content-Type"]),
    st.one_of(
        st.sampled_from(
            [
                'Bearer realm="http://@HOST@/token",service="x"',
                'Bearer realm="http://127.0.0.1:1/token",service="x"',
                'Bearer realm="/token"',
                "Basic realm=x",
                "86400",
                "-1",
                "/v2/team/tf/blobs/uploads/x",
                "http://127.0.0.1:1/elsewhere",
            ]
        ),
        st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40),
    ),
    max_size=3,
)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _layer(draw: Any, blobs: list[bytes]) -> Any:
    return draw(
        st.one_of(
            JSONISH,
            st.fixed_dictionaries(
                {
                    "mediaType": st.sampled_from(
                        ["application/vnd.dsse.envelope.v1+json", "x", None]
                    ),
                    "size": st.one_of(st.integers(-5, 1 << 40), st.just(len(blobs[0])), JSONISH),
                    "digest": st.one_of(
                        st.sampled_from(["sha256:" + "0" * 64, "sha512:ab", "x", "sha256:../.."]),
                        JSONISH,
                    ),
                }
            ),
        )
    )


@st.composite
def registries(draw: Any) -> dict[str, Any]:
    manifest: Any = draw(
        st.one_of(
            JSONISH,
            st.fixed_dictionaries({"layers": st.lists(st.builds(lambda: None), max_size=0)}),
        )
    )
    layers = [_layer(draw, [b"{}"]) for _ in range(draw(st.integers(0, 4)))]
    if draw(st.booleans()):  # the real report among them, served as it is
        layers.insert(draw(st.integers(0, len(layers))), "@REAL@")
    if isinstance(manifest, dict) and draw(st.booleans()):
        manifest["layers"] = layers
    raw = draw(st.one_of(st.just(json.dumps(manifest).encode()), st.binary(max_size=64)))
    return {
        "manifest": Answer(draw(STATUSES), draw(HEADERS), [raw]),
        "blob": Answer(draw(STATUSES), draw(HEADERS), [draw(st.binary(max_size=64))]),
        "token": Answer(draw(STATUSES), draw(HEADERS), [draw(st.binary(max_size=64))]),
        "upload": Answer(draw(STATUSES), draw(HEADERS), [draw(st.binary(max_size=64))]),
        "put": Answer(draw(STATUSES), draw(HEADERS), [b""]),
        "head": Answer(draw(STATUSES), draw(HEADERS), [b" " * draw(st.integers(0, 600))]),
    }


@pytest.fixture(scope="module")
def reg() -> Iterator[HostileRegistry]:
    r = HostileRegistry()
    try:
        yield r
    finally:
        r.close()


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory, reg: HostileRegistry) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("fuzz")
    key, pub = make_keys(tmp, "team")
    env = sign_result(smoke_result(), key, lock_dir=None, image_id=None, image_ref=reg.image)
    report = tmp / "report.intoto.json"
    report.write_bytes(envelope_bytes(env))
    return report, pub


@settings(
    max_examples=scaled(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(answers=registries())
def test_random_registry_answers_never_give_a_traceback(
    answers: dict[str, Any],
    reg: HostileRegistry,
    signed: tuple[Path, Path],
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "none"))
    monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", "0")
    monkeypatch.setenv("ENVLOCK_HTTP_TIMEOUT", "5")
    report, pub = signed
    reg.server.routes.clear()
    for answer in answers.values():
        answer.headers = {k: v.replace("@HOST@", reg.host) for k, v in answer.headers.items()}
    real = report.read_bytes()
    digest = "sha256:" + hashlib.sha256(real).hexdigest()
    layer = {"mediaType": DSSE, "size": len(real), "digest": digest}
    manifest = answers["manifest"]
    manifest.chunks = [c.replace(b'"@REAL@"', json.dumps(layer).encode()) for c in manifest.chunks]
    reg.route("GET", reg.att_path(), manifest)
    reg.route("GET", reg.blob_path(digest), Answer(200, {}, [real]))
    reg.route("PUT", reg.att_path(), answers["put"])
    reg.route("GET", reg.blob_path("sha256:" + "0" * 64), answers["blob"])
    reg.route("GET", "/token", answers["token"])
    reg.route("POST", f"/v2/{REPO}/blobs/uploads/", answers["upload"])
    reg.route("HEAD", f"/v2/{REPO}/manifests/{DIGEST}", answers["head"])  # a bundle's subject
    reg.route("PUT", "/v2/team/tf/blobs/uploads/x", answers["put"])
    for argv in (
        ["verify", "--from-registry", "--image", reg.image, "--key", str(pub)],
        ["verify", "--from-registry", "--image", reg.image, "--key", str(pub), "--json"],
        ["report", "attach", str(report), "--image", reg.image],
        ["report", "attach", str(report), "--image", reg.image, "--format", "legacy"],
    ):
        code = main(argv)
        out, err = capsys.readouterr()
        assert code in (0, 1, 2, 3), (argv, code, err)
        assert "Traceback" not in err, err
    assert reg.server.errors == [] or all(
        "BrokenPipe" in e or "Reset" in e for e in reg.server.errors
    )


BUNDLE = "application/vnd.dev.sigstore.bundle.v0.3+json"


@st.composite
def referrer_registries(draw: Any) -> dict[str, Any]:
    """Random answers for the referrers layouts: the referrers API (or its 404), the
    tag index, a bundle manifest and its blob, each fuzzed; the real bundle may be
    listed among them, served as it is."""
    entry = st.one_of(
        JSONISH,
        st.fixed_dictionaries(
            {
                "artifactType": st.sampled_from([BUNDLE, "x", None]),
                "digest": st.one_of(
                    st.sampled_from(["@MANIFEST@", "sha256:" + "0" * 64, "sha256:../x"]), JSONISH
                ),
                "size": st.one_of(st.integers(-5, 1 << 40), st.just("@SIZE@"), JSONISH),
            }
        ),
    )
    entries = draw(st.lists(entry, max_size=4))
    if draw(st.booleans()):
        entries.insert(0, "@REAL@")
    index = {"schemaVersion": 2, "manifests": entries} if draw(st.booleans()) else draw(JSONISH)
    raw_index = draw(st.one_of(st.just(json.dumps(index).encode()), st.binary(max_size=64)))
    layer = st.fixed_dictionaries(
        {
            "mediaType": st.sampled_from([BUNDLE, "x"]),
            "digest": st.sampled_from(["@BLOB@", "sha256:" + "0" * 64, "nope"]),
            "size": st.one_of(st.just("@BLOBSIZE@"), st.integers(-1, 1 << 40)),
        }
    )
    manifest = {
        "subject": draw(st.one_of(st.just({"digest": "@IMAGE@"}), JSONISH)),
        "layers": draw(st.lists(layer, max_size=2)),
    }
    return {
        "referrers": Answer(
            draw(st.sampled_from([200, 404, 500, 401])), draw(HEADERS), [raw_index]
        ),
        "tag": Answer(draw(st.sampled_from([200, 404, 500])), draw(HEADERS), [raw_index]),
        "manifest": Answer(
            draw(st.sampled_from([200, 404, 500])),
            draw(HEADERS),
            [draw(st.one_of(st.just(json.dumps(manifest).encode()), st.binary(max_size=64)))],
        ),
        "blob": Answer(
            draw(STATUSES), draw(HEADERS), [draw(st.one_of(st.just(b"@BUNDLE@"), st.binary()))]
        ),
    }


@settings(
    max_examples=scaled(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(answers=referrer_registries())
def test_random_referrers_answers_never_give_a_traceback(
    answers: dict[str, Any],
    reg: HostileRegistry,
    signed: tuple[Path, Path],
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    from envlock.report import dsse, sigstore

    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "none"))
    monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", "0")
    monkeypatch.setenv("ENVLOCK_HTTP_TIMEOUT", "5")
    report, pub = signed
    reg.server.routes.clear()
    reg.server.fallback = None
    bundle = sigstore.bundle_bytes(dsse.parse_envelope(report.read_bytes()))
    bdigest = "sha256:" + hashlib.sha256(bundle).hexdigest()
    real_manifest = json.dumps(
        {
            "subject": {"digest": DIGEST},
            "layers": [{"mediaType": BUNDLE, "digest": bdigest, "size": len(bundle)}],
        }
    ).encode()
    rdigest = "sha256:" + hashlib.sha256(real_manifest).hexdigest()
    fuzzed = answers["manifest"]
    fuzzed.chunks = [
        c.replace(b"@IMAGE@", DIGEST.encode())
        .replace(b'"@BLOBSIZE@"', str(len(bundle)).encode())
        .replace(b"@BLOB@", bdigest.encode())
        for c in fuzzed.chunks
    ]
    fdigest = "sha256:" + hashlib.sha256(b"".join(fuzzed.chunks)).hexdigest()
    real_entry = {"artifactType": BUNDLE, "digest": rdigest, "size": len(real_manifest)}
    for name in ("referrers", "tag"):
        answers[name].chunks = [
            c.replace(b'"@REAL@"', json.dumps(real_entry).encode())
            .replace(b"@MANIFEST@", fdigest.encode())
            .replace(b'"@SIZE@"', str(len(b"".join(fuzzed.chunks))).encode())
            for c in answers[name].chunks
        ]
    for answer in answers.values():
        answer.headers = {k: v.replace("@HOST@", reg.host) for k, v in answer.headers.items()}
    answers["blob"].chunks = [c.replace(b"@BUNDLE@", bundle) for c in answers["blob"].chunks]
    reg.route("GET", reg.referrers_path(), answers["referrers"])
    reg.route("GET", reg.tag_path(), answers["tag"])
    reg.route("GET", f"/v2/{REPO}/manifests/{fdigest}", fuzzed)
    reg.route("GET", f"/v2/{REPO}/manifests/{rdigest}", Answer(200, {}, [real_manifest]))
    reg.route("GET", reg.blob_path(bdigest), answers["blob"])
    for argv in (
        ["verify", "--from-registry", "--image", reg.image, "--key", str(pub)],
        ["verify", "--from-registry", "--image", reg.image, "--key", str(pub), "--json"],
    ):
        code = main(argv)
        out, err = capsys.readouterr()
        assert code in (0, 1, 3), (argv, code, err)
        assert "Traceback" not in err, err
    assert reg.server.errors == [] or all(
        "BrokenPipe" in e or "Reset" in e for e in reg.server.errors
    )
