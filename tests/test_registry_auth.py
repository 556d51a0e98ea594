"""The pieces of envlock.image.registry_auth that need no registry: challenges, where
credentials may go, and what `docker login` stored (tests/test_registry_auth_docker.py
runs the whole flow against real registries)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from envlock.errors import EnvironmentFailure
from envlock.image.registry_auth import Credentials, docker_credentials, may_send, parse_challenge


def test_a_bearer_challenge_keeps_a_scope_with_commas() -> None:
    got = parse_challenge(
        'Bearer realm="https://ghcr.example/token",service="ghcr.example",'
        'scope="repository:team/tf:pull,push"'
    )
    assert got is not None
    assert got.scheme == "bearer"
    assert got.params == {
        "realm": "https://ghcr.example/token",
        "service": "ghcr.example",
        "scope": "repository:team/tf:pull,push",
    }
    assert got.scope == "repository:team/tf:pull,push"


@pytest.mark.parametrize("header", ["", "Negotiate abc", "Digest realm=x", "garbage"])
def test_other_challenges_are_not_answered(header: str) -> None:
    assert parse_challenge(header) is None


def test_basic_challenge() -> None:
    got = parse_challenge('Basic realm="envlock-test"')
    assert got is not None and got.scheme == "basic" and got.scope == ""


@pytest.mark.parametrize(
    ("url", "insecure", "ok"),
    [
        ("https://registry.example/token", False, True),
        ("http://registry.example/token", False, False),
        ("http://registry.example/token", True, True),
        ("http://127.0.0.1:5001/token", False, True),
        ("http://localhost:5001/v2/a", False, True),
        ("http://10.1.2.3:5000/v2/a", False, False),
    ],
)
def test_credentials_go_over_https_to_loopback_or_where_asked(
    url: str, insecure: bool, ok: bool
) -> None:
    assert may_send(url, insecure) is ok


def _config(tmp_path: Path, doc: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.json").write_text(json.dumps(doc), encoding="utf-8")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))


def test_docker_login_credentials_are_read_from_docker_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    auth = base64.b64encode(b"ci:s3cret").decode()
    _config(
        tmp_path,
        {
            "auths": {
                "registry.example:5000": {"auth": auth},
                "ghcr.example": {"identitytoken": "refresh-me"},
            }
        },
        monkeypatch,
    )
    assert docker_credentials("registry.example:5000") == Credentials("ci", "s3cret")
    assert docker_credentials("ghcr.example") == Credentials(identity_token="refresh-me")
    assert docker_credentials("other.example") is None


def test_a_missing_credential_helper_is_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _config(tmp_path, {"credHelpers": {"registry.example": "envlock-no-such-helper"}}, monkeypatch)
    with pytest.raises(EnvironmentFailure) as e:
        docker_credentials("registry.example")
    assert e.value.exit_code == 3
    assert "cannot read Docker's credentials for registry.example" in e.value.message
