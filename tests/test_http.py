"""envlock.index.http: session settings, CA bundle choice, error mapping."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures.index.fakeindex import FakeIndex, closed_port

from envlock.errors import EnvironmentFailure, UsageError
from envlock.index import body, http


def test_ca_bundle_prefers_the_configured_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    for var in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "PIP_CERT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    assert http.ca_bundle() == str(bundle)
    assert http.session().verify == str(bundle)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    chosen = http.ca_bundle()
    assert chosen != str(tmp_path / "missing.pem")
    if Path("/etc/ssl/certs/ca-certificates.crt").is_file():
        assert isinstance(chosen, str) and Path(chosen).is_file()


def test_settings_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOCK_HTTP_TIMEOUT", "5")
    monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", "2")
    monkeypatch.setenv("ENVLOCK_HTTP_BACKOFF", "0.1")
    s = http.HttpSettings.from_env(pool_size=3)
    assert s == http.HttpSettings(timeout=(5.0, 5.0), retries=2, backoff=0.1, pool_size=3)
    monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", "many")
    with pytest.raises(UsageError, match="ENVLOCK_HTTP_RETRIES='many' is not a non-negative"):
        http.HttpSettings.from_env()


def test_timeout_is_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that accepts and never answers fails with exit 3 after the timeout."""
    import socket

    monkeypatch.setenv("ENVLOCK_HTTP_TIMEOUT", "0.3")
    monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", "0")
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        url = f"http://127.0.0.1:{srv.getsockname()[1]}/simple"
        with pytest.raises(EnvironmentFailure, match="timed out") as info:
            http.get(http.session(), url + "/x/", index=url)
    assert info.value.exit_code == 3


def test_errors_become_environment_failures(
    monkeypatch: pytest.MonkeyPatch, make_index: Callable[..., FakeIndex]
) -> None:
    monkeypatch.setenv("ENVLOCK_HTTP_BACKOFF", "0")
    url = f"http://127.0.0.1:{closed_port()}/simple"
    with pytest.raises(EnvironmentFailure) as info:
        http.get(http.session(), url + "/tensorflow/", index=url)
    assert str(info.value) == f"cannot reach the package index at {url}: connection refused"
    assert info.value.hint and "--index-url" in info.value.hint

    idx = make_index(faults={"/simple/nothing/": [429, 429]})
    with pytest.raises(EnvironmentFailure, match=r"HTTP 404 Not Found for .*/simple/nothing/"):
        http.get(http.session(), idx.url + "/nothing/", index=idx.url)
    assert idx.hits["/simple/nothing/"] == 3  # 429 twice, retried, then the real 404
    assert idx.faults["/simple/nothing/"] == []  # both were served


def test_a_range_answer_that_does_not_end_is_cut_off_at_the_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 38, break 5: an endless answer to one range read grew to 833 MB (the
    body was joined whole before its length was checked). A 206 that names 100
    bytes and then streams without end (no Content-Length, close-delimited) is now
    cut off after the first chunk past the range: exit 3 naming the server. The
    server here stops by itself after 64 MiB."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    sent: list[int] = []
    done = threading.Event()  # the handler's thread is a daemon: nothing joins it

    class Endless(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the body ends when the connection does

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(206)
            self.send_header("Content-Range", "bytes 0-99/1000")
            self.end_headers()
            total, chunk = 0, b"\0" * 65536
            try:
                while total < 64 << 20:
                    self.wfile.write(chunk)
                    total += len(chunk)
            except OSError:  # the client hung up
                pass
            sent.append(total)
            done.set()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", "0")
    url = f"http://127.0.0.1:{server.server_address[1]}/w.whl"
    try:
        with (
            http.session(http.HttpSettings.from_env()) as sess,
            pytest.raises(EnvironmentFailure) as e,
        ):
            body.get_range(sess, url, 0, 99, index="the index")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert e.value.message == (
        f"the file server of the index sent more than the 100 bytes of the range it "
        f"answered for {url} (bytes=0-99)"
    )
    assert e.value.exit_code == 3
    assert done.wait(60)  # the handler saw the hang-up (or sent all 64 MiB)
    assert sent and sent[0] < 64 << 20  # the client hung up long before the end


class _Trickle:
    """A server on 127.0.0.1 that answers every request with a status line, then
    headers one byte every 0.2 s, for up to 60 s (it stops when the client hangs up):
    each byte resets a read timeout, so only a deadline on the whole wait ends it."""

    def __init__(self) -> None:
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.served = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        import threading

        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: Any) -> None:
        import time

        self.served += 1
        with conn:
            try:
                conn.settimeout(5)
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                ends = time.monotonic() + 60
                while time.monotonic() < ends:
                    conn.sendall(b"a")
                    time.sleep(0.2)
            except OSError:  # the client hung up
                pass

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def trickle() -> Iterator[_Trickle]:
    server = _Trickle()
    yield server
    server.close()


def test_headers_that_trickle_in_meet_the_commands_deadline(
    trickle: _Trickle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38, break 4 (the rest): the deadline watched bodies only; a server that
    sends its headers one byte every 0.2 s never trips a 3 s read timeout, and held
    the request for as long as it liked (60 s here). Now the socket is shut down
    when the command's time is up: exit 3 naming the deadline, within seconds, and
    no new try is made after it."""
    import time

    from envlock import deadline

    monkeypatch.setenv("ENVLOCK_HTTP_TIMEOUT", "3")
    url = f"http://127.0.0.1:{trickle.port}/simple/dep-a/"
    deadline.start({"ENVLOCK_HTTP_DEADLINE": "1.5"})
    started = time.monotonic()
    try:
        with http.session() as sess, pytest.raises(EnvironmentFailure) as e:
            http.get(sess, url, index=url)
    finally:
        deadline.stop()
    took = time.monotonic() - started
    assert took < 5, took
    assert e.value.exit_code == 3
    assert e.value.message == (
        f"the command's network deadline of 1.5 s ran out while waiting for the answer of {url}"
    )
    assert trickle.served == 1  # the retries did not ask again past the deadline


def test_without_a_deadline_a_headers_wait_is_not_watched(monkeypatch: pytest.MonkeyPatch) -> None:
    """Library calls outside a command: no timer, no pool hook in the way."""
    from envlock import deadline

    deadline.stop()
    with http._headers_watched("http://x/") as taken:
        assert taken.connections == []
    assert getattr(http._taking, "box", None) is None


def test_verify_from_a_registry_whose_headers_trickle_is_exit_3_within_the_deadline(
    trickle: _Trickle,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same through a command: `verify --from-registry` against a registry that
    trickles its headers ends in exit 3 within the deadline, no traceback."""
    import time

    from envlock.cli import main
    from tests.report_support import make_keys

    _, pub = make_keys(tmp_path, "team")
    monkeypatch.setenv("ENVLOCK_HTTP_TIMEOUT", "3")
    monkeypatch.setenv("ENVLOCK_HTTP_DEADLINE", "2")
    image = f"127.0.0.1:{trickle.port}/team/tf@sha256:{'a' * 64}"
    started = time.monotonic()
    code = main(["verify", "--from-registry", "--image", image, "--key", str(pub)])
    err = capsys.readouterr().err
    assert time.monotonic() - started < 8
    assert code == 3, err
    assert "the command's network deadline of 2 s ran out while waiting for the answer of" in err
    assert "Traceback" not in err
