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
from tests.hostile_registry import REPO, Answer, HostileRegistry
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
    reg.route("PUT", "/v2/team/tf/blobs/uploads/x", answers["put"])
    for argv in (
        ["verify", "--from-registry", "--image", reg.image, "--key", str(pub)],
        ["verify", "--from-registry", "--image", reg.image, "--key", str(pub), "--json"],
        ["report", "attach", str(report), "--image", reg.image],
    ):
        code = main(argv)
        out, err = capsys.readouterr()
        assert code in (0, 1, 2, 3), (argv, code, err)
        assert "Traceback" not in err, err
    assert reg.server.errors == [] or all(
        "BrokenPipe" in e or "Reset" in e for e in reg.server.errors
    )
