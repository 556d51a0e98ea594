"""Credentials for a registry's HTTP API v2, sent the way Docker clients send them.

The credentials are Docker's own, from ``docker login``: ``~/.docker/config.json``
(or ``$DOCKER_CONFIG``), with its credential stores and helpers, read through
docker-py's ``docker.auth`` (the code ``docker push`` from Python uses). The
registry's ``401`` challenge (``WWW-Authenticate``) says how to use them:

- ``Basic``: sent with every request (a registry with htpasswd auth);
- ``Bearer realm=...,service=...,scope=...``: traded for a token at the realm
  (GitHub's, GitLab's, Docker Hub's and most hosted registries), as the
  distribution token protocol describes: ``GET realm?service=&scope=`` with the
  credentials as Basic auth (none: an anonymous token, enough to read a public
  repository), or, when ``docker login`` kept an identity token (an OAuth2
  refresh token), ``POST realm`` with ``grant_type=refresh_token``. The answer's
  ``token`` (or ``access_token``) goes into ``Authorization: Bearer``.

Sources: distribution ``docs/spec/auth/token.md`` (the challenge, the token
request and response) and ``docs/spec/auth/oauth.md`` (the refresh-token POST).

Credentials travel only over HTTPS, to a loopback host, or where the user
asked for plain HTTP (``--insecure-registry``), as Docker itself does.
"""

from __future__ import annotations

import base64
import ipaddress
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from envlock.errors import EnvironmentFailure

if TYPE_CHECKING:
    import requests


@dataclass(frozen=True)
class Credentials:
    username: str = ""
    password: str = ""
    identity_token: str = ""  # docker login's OAuth2 refresh token, when it kept one


@dataclass(frozen=True)
class Challenge:
    scheme: str  # "basic" or "bearer"
    params: dict[str, str]

    @property
    def scope(self) -> str:
        return self.params.get("scope", "")


def docker_credentials(registry: str) -> Credentials | None:
    """What ``docker login REGISTRY`` stored, or None (none stored, or no docker-py)."""
    try:
        from docker import auth
        from docker.errors import DockerException
    except ImportError:  # the GPU host's Python: no docker-py, so no stored credentials
        return None
    try:
        with warnings.catch_warnings():  # a missing helper is said once, below
            warnings.simplefilter("ignore", UserWarning)
            found = auth.resolve_authconfig(auth.load_config(), registry)
    except DockerException as e:
        raise EnvironmentFailure(
            f"cannot read Docker's credentials for {registry}: {e}",
            hint="check the credential helper in Docker's config.json, "
            f"or `docker login {registry}`",
        ) from e
    if not found:
        return None
    low = {str(k).lower(): v for k, v in found.items()}
    creds = Credentials(
        username=str(low.get("username") or ""),
        password=str(low.get("password") or ""),
        identity_token=str(low.get("identitytoken") or ""),
    )
    if (creds.username and creds.password) or creds.identity_token:
        return creds
    return None


def parse_challenge(header: str) -> Challenge | None:
    """``Bearer realm="...",service="...",scope="..."`` -> Challenge; None if unusable."""
    from requests.utils import parse_dict_header

    scheme, _, rest = header.strip().partition(" ")
    scheme = scheme.lower()
    if scheme not in ("basic", "bearer"):
        return None
    parsed: dict[str, str | None] = parse_dict_header(rest)  # type: ignore[no-untyped-call]
    params = {k.lower(): v for k, v in parsed.items() if v is not None}
    return Challenge(scheme, params)


def basic(creds: Credentials) -> str:
    raw = f"{creds.username}:{creds.password}".encode()
    return "Basic " + base64.b64encode(raw).decode("ascii")


def is_loopback(host: str) -> bool:
    """Whether a registry ``host[:port]`` is this machine (plain HTTP is allowed there)."""
    name = host
    if name.startswith("["):  # [::1]:5000
        name = name[1 : name.find("]")] if "]" in name else name
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def may_send(url: str, insecure: bool) -> bool:
    """Whether credentials may go to ``url``: HTTPS, a loopback host, or plain HTTP asked for."""
    parts = urlsplit(url)
    return parts.scheme == "https" or insecure or is_loopback(parts.netloc)


def bearer_token(
    sess: requests.Session,
    challenge: Challenge,
    scope: str,
    creds: Credentials | None,
    *,
    registry: str,
    insecure: bool,
) -> str:
    """A token from the challenge's realm for ``scope``; EnvironmentFailure (exit 3) if refused."""
    import requests

    from envlock.index import http
    from envlock.index.body import BodyError, read_body

    realm = challenge.params.get("realm", "")
    if urlsplit(realm).scheme not in ("http", "https"):
        raise EnvironmentFailure(
            f"the registry {registry} asks for a token from {realm!r}, which is not a URL",
            hint="check the registry's token service",
        )
    send = creds if creds is not None and may_send(realm, insecure) else None
    service = challenge.params.get("service", "")
    try:
        if send is not None and send.identity_token:
            resp = sess.post(
                realm,
                data={
                    "grant_type": "refresh_token",
                    "refresh_token": send.identity_token,
                    "service": service,
                    "scope": scope,
                    "client_id": "envlock",
                },
                stream=True,
            )
        else:
            params = {"service": service, "scope": scope}
            if send is not None:
                params["account"] = send.username
            auth = (send.username, send.password) if send is not None else None
            resp = sess.get(realm, params=params, auth=auth, stream=True)
    except requests.RequestException as e:
        raise EnvironmentFailure(
            f"cannot reach the token service of {registry} ({urlsplit(realm).netloc}): "
            f"{http.reason_of(str(e))}",
            hint="check the network path to the registry's token service",
        ) from e
    if resp.status_code != 200:
        resp.close()
    if resp.status_code in (401, 403):
        who = "the credentials `docker login` stored" if send else "an anonymous request"
        raise EnvironmentFailure(
            f"the token service of {registry} refused {who} for {scope} (HTTP {resp.status_code})",
            hint=f"docker login {registry}"
            + (" again (a token that can push to the repository)" if send else ""),
        )
    doc = None
    if resp.status_code == 200:
        import json

        try:
            body = read_body(resp, "token")
        except BodyError as e:
            raise EnvironmentFailure(
                f"the token service of {registry} ({urlsplit(realm).netloc}) sent {e}",
                hint="check the registry's token service",
            ) from e
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError):  # not JSON, or nested past Python's stack
            doc = None
    token = (doc.get("token") or doc.get("access_token")) if isinstance(doc, dict) else None
    if not isinstance(token, str) or not token:
        raise EnvironmentFailure(
            f"the token service of {registry} sent no token for {scope} (HTTP {resp.status_code})",
            hint="check the registry's token service",
        )
    return token
