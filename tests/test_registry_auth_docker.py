"""Registries that ask for credentials: push, attach and verify with `docker login`'s.

Two real distribution registries (Debian's docker-registry, the package the test
setup installs) run here with configs of this module's own, each on its own
loopback port: one with htpasswd (Basic) auth, one with token (Bearer) auth. The
token service is this module's own small one (the registry verifies each token
it issues against a certificate in its config, so the registry's side is real);
hosted registries run theirs. Credentials come from a real `docker login`, into a
DOCKER_CONFIG of the test's own, and reach the registry through docker-py (the
push) and envlock's registry client (attach, verify --from-registry).
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from docker_support import docker_unavailable
from report_support import cli, signed_report

pytestmark = [pytest.mark.docker, pytest.mark.slow]

USER = "envlock-ci"
SERVICE = "envlock-test-registry"
ISSUER = "envlock-test-token-service"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class TokenService:
    """Issues registry tokens (distribution's JWT: RS256, the certificate in x5c) for
    USER with the right password: the actions asked for; anyone else: none."""

    password: str
    key_pem: bytes
    cert_der: bytes
    port: int = 0
    asked: list[dict[str, str]] = field(default_factory=list)  # scope, account, auth kind
    _server: ThreadingHTTPServer | None = None

    def start(self) -> TokenService:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                query = parse_qs(urlsplit(self.path).query)
                scope = query.get("scope", [""])[0]
                given = self.headers.get("Authorization", "")
                expected = (
                    "Basic " + base64.b64encode(f"{USER}:{service.password}".encode()).decode()
                )
                service.asked.append(
                    {
                        "scope": scope,
                        "account": query.get("account", [""])[0],
                        "auth": given[:5],
                        "agent": self.headers.get("User-Agent", ""),
                    }
                )
                if given and given != expected:
                    self._answer(401, {"details": "wrong user name or password"})
                    return
                access = []
                if scope.startswith("repository:"):
                    _, name, actions = scope.split(":", 2)
                    granted = actions.split(",") if given else []
                    access.append({"type": "repository", "name": name, "actions": granted})
                self._answer(200, {"token": service.token(USER if given else "", access)})

            def _answer(self, status: int, doc: dict[str, Any]) -> None:
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def token(self, subject: str, access: list[dict[str, Any]]) -> str:
        import jwt

        now = int(time.time())
        claims = {
            "iss": ISSUER,
            "sub": subject,
            "aud": SERVICE,
            "exp": now + 300,
            "nbf": now - 30,
            "iat": now,
            "jti": uuid.uuid4().hex,
            "access": access,
        }
        x5c = [base64.b64encode(self.cert_der).decode()]
        return jwt.encode(claims, self.key_pem, algorithm="RS256", headers={"x5c": x5c})

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def _signing_cert() -> tuple[bytes, bytes, bytes]:
    """(key PEM, certificate PEM, certificate DER) of a self-signed RSA key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ISSUER)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return (
        key_pem,
        cert.public_bytes(serialization.Encoding.PEM),
        cert.public_bytes(serialization.Encoding.DER),
    )


@dataclass
class Registry:
    kind: str  # "basic" or "token"
    host: str  # 127.0.0.1:PORT
    password: str
    tokens: TokenService | None


@pytest.fixture(scope="module", params=["basic", "token"])
def registry(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Registry]:
    import requests

    exe = shutil.which("docker-registry")
    if exe is None:
        docker_unavailable("no docker-registry here (tests/docker/setup.sh installs Debian's)")
    kind = str(request.param)
    root = tmp_path_factory.mktemp(f"registry-{kind}")
    password = uuid.uuid4().hex
    port = _free_port()
    tokens: TokenService | None = None
    if kind == "basic":
        import bcrypt

        hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=5)).decode()
        (root / "htpasswd").write_text(f"{USER}:{hashed}\n", encoding="utf-8")
        auth = f"  htpasswd:\n    realm: envlock-test\n    path: {root / 'htpasswd'}\n"
    else:
        key_pem, cert_pem, cert_der = _signing_cert()
        (root / "token-cert.pem").write_bytes(cert_pem)
        tokens = TokenService(password, key_pem, cert_der).start()
        auth = (
            "  token:\n"
            f"    realm: http://127.0.0.1:{tokens.port}/token\n"
            f"    service: {SERVICE}\n"
            f"    issuer: {ISSUER}\n"
            f"    rootcertbundle: {root / 'token-cert.pem'}\n"
        )
    config = root / "registry.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: warn\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
        f"auth:\n{auth}",
        encoding="utf-8",
    )
    log = (root / "registry.log").open("wb")
    proc = subprocess.Popen([exe, "serve", str(config)], stdout=log, stderr=log)
    try:
        for _ in range(100):
            try:
                if requests.get(f"http://127.0.0.1:{port}/v2/", timeout=2).status_code == 401:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.1)
        else:
            pytest.fail("the registry did not come up:\n" + (root / "registry.log").read_text())
        yield Registry(kind, f"127.0.0.1:{port}", password, tokens)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        if tokens is not None:
            tokens.stop()


@pytest.fixture
def logged_in(registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A DOCKER_CONFIG holding what a real `docker login` stored for the registry."""
    if shutil.which("docker") is None:
        docker_unavailable("no docker client here")
    config = tmp_path / "docker-config"
    config.mkdir()
    env = {**os.environ, "DOCKER_CONFIG": str(config)}
    login = subprocess.run(
        ["docker", "login", registry.host, "--username", USER, "--password-stdin"],
        input=registry.password,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert login.returncode == 0, login.stderr
    assert registry.host in json.loads((config / "config.json").read_text())["auths"]
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    return config


@pytest.fixture
def pushed(
    registry: Registry,
    logged_in: Path,
    base_image: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> str:
    """REPO@sha256:... of a fresh image pushed by `envlock build --push` with the login."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "Dockerfile").write_text(
        f"FROM {base_image}\nLABEL io.envlock.test.auth={uuid.uuid4().hex}\n", encoding="utf-8"
    )
    tag = f"{registry.host}/team/auth-{registry.kind}:{uuid.uuid4().hex[:8]}"
    code, out, err = cli(
        capsys,
        *["build", str(bundle), "-t", tag, "--push", "--network", "none", "--json"],
        *["--progress", "quiet"],
    )
    assert code == 0, err
    pinned = str(json.loads(out)["pushed"]["pinned"])
    assert pinned.startswith(f"{registry.host}/team/auth-{registry.kind}@sha256:")
    return pinned


def test_push_attach_and_verify_with_docker_logins_credentials(
    registry: Registry, pushed: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report, pub = signed_report(capsys, tmp_path, pushed)
    repo, _, digest = pushed.partition("@")
    # a Sigstore bundle as a referrer (this registry has no referrers API: the tag index)
    code, out, err = cli(capsys, "report", "attach", str(report), "--image", pushed, "--json")
    assert code == 0, err
    done = json.loads(out)
    assert done["layout"] == "referrers tag"
    assert done["index"] == f"{repo}:{digest.replace(':', '-')}"
    assert done["attached"].startswith(f"{repo}@sha256:")
    # and cosign's older layout
    code, out, err = cli(
        capsys, "report", "attach", str(report), "--image", pushed, "--format", "legacy"
    )
    assert code == 0, err
    tag = digest.replace(":", "-") + ".att"
    assert out == f"attached {report} to {pushed} as {repo}:{tag} (legacy)\n"
    code, out, err = cli(capsys, "verify", "--from-registry", "--image", pushed, "--key", str(pub))
    assert code == 0, err
    assert out.count("VERIFIED: signed by the given key, smoke result PASSED") == 2
    assert "found: test result(s): 1 referrers tag, 1 legacy; SBOM(s): none\n" in out
    if registry.tokens is not None:  # envlock asked for a push token with the login's account
        pushing = [
            a
            for a in registry.tokens.asked
            if a["agent"].startswith("envlock/")
            and a["scope"].startswith(f"repository:team/auth-{registry.kind}:")
            # the registry names the actions in either order (a Go map)
            and set(a["scope"].rsplit(":", 1)[1].split(",")) == {"pull", "push"}
        ]
        assert pushing, registry.tokens.asked
        assert all(a["account"] == USER and a["auth"] == "Basic" for a in pushing)


def test_without_credentials_exit_3_names_docker_login(
    registry: Registry,
    pushed: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    report, pub = signed_report(capsys, tmp_path, pushed)
    empty = tmp_path / "no-login"
    empty.mkdir()
    monkeypatch.setenv("DOCKER_CONFIG", str(empty))
    for argv in (
        ["report", "attach", str(report), "--image", pushed],
        ["verify", "--from-registry", "--image", pushed, "--key", str(pub)],
    ):
        code, _, err = cli(capsys, *argv)
        assert code == 3, err
        assert "HTTP 401" in err, err
        assert f"hint: this registry asks for credentials: `docker login {registry.host}`" in err
        assert "Traceback" not in err


def test_wrong_password_exit_3(
    registry: Registry,
    pushed: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    report, _ = signed_report(capsys, tmp_path, pushed)
    stale = tmp_path / "stale-login"
    stale.mkdir()
    auth = base64.b64encode(f"{USER}:not-the-password".encode()).decode()
    (stale / "config.json").write_text(json.dumps({"auths": {registry.host: {"auth": auth}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(stale))
    code, _, err = cli(capsys, "report", "attach", str(report), "--image", pushed)
    assert code == 3, err
    if registry.kind == "token":
        assert f"the token service of {registry.host} refused the credentials" in err, err
        assert f"hint: docker login {registry.host} again" in err
    else:
        assert "HTTP 401" in err, err
        assert f"the credentials `docker login {registry.host}` stored may not write to" in err
    assert "Traceback" not in err
