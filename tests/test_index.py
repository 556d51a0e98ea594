"""envlock.index.config: where the index is, from the environment and pip's configuration.

pip's configuration is read through one helper, ``config.pip_setting``, for both
``index-url`` (here) and ``cert`` (envlock.index.http.ca_bundle). Its precedence is
checked file by file, and against pip's own option parser in this venv.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from envlock.errors import UsageError
from envlock.index import config, http


def _isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, move_etc: bool = True) -> None:
    """Every pip configuration location under tmp_path; no index/CA variables set."""
    for var in list(os.environ):
        if var.startswith(("PIP_", "UV_")):
            monkeypatch.delenv(var)
    for var in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv(
        "XDG_CONFIG_DIRS", os.pathsep.join([str(tmp_path / "xdg1"), str(tmp_path / "xdg2")])
    )
    # the site file: pip reads <sys.prefix>/pip.conf, envlock $VIRTUAL_ENV/pip.conf
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path / "venv"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    if move_etc:
        monkeypatch.setattr(config, "_ETC_DIR", tmp_path / "etc")


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_later_pip_file_wins_for_index_url_and_cert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _isolate(monkeypatch, tmp_path)
    assert config.pip_setting("index-url") is None
    assert config.pip_setting("cert") is None
    # pip's load order; each file added must take over from all before it
    ladder = [
        ("xdg1", tmp_path / "xdg1" / "pip" / "pip.conf"),
        ("xdg2", tmp_path / "xdg2" / "pip" / "pip.conf"),
        ("etc", tmp_path / "etc" / "pip.conf"),
        ("legacy-user", tmp_path / "home" / ".pip" / "pip.conf"),
        ("user", tmp_path / "home" / ".config" / "pip" / "pip.conf"),
        ("site", tmp_path / "venv" / "pip.conf"),
        ("env-file", tmp_path / "elsewhere" / "env.conf"),
    ]
    for name, path in ladder:
        pem = _write(tmp_path / "certs" / f"{name}.pem", "-----BEGIN CERTIFICATE-----\n")
        _write(path, f"[global]\nindex-url = http://127.0.0.1:1/{name}/\ncert = {pem}\n")
        if name == "env-file":
            monkeypatch.setenv("PIP_CONFIG_FILE", str(path))
        assert config.index_url() == f"http://127.0.0.1:1/{name}", name
        assert http.ca_bundle() == str(pem), name
        setting = config.pip_setting("cert")
        assert setting is not None and setting.origin == f"pip configuration {path} [global]"

    # XDG_CONFIG_HOME moves the user file (and an empty one means ~/.config)
    monkeypatch.delenv("PIP_CONFIG_FILE")
    (tmp_path / "venv" / "pip.conf").unlink()
    _write(tmp_path / "cfg" / "pip" / "pip.conf", "[global]\nindex-url = http://127.0.0.1:1/cfg\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert config.index_url() == "http://127.0.0.1:1/cfg"
    monkeypatch.setenv("XDG_CONFIG_HOME", "")
    assert config.index_url() == "http://127.0.0.1:1/user"

    # the environment beats every file, for both settings
    env_pem = _write(tmp_path / "certs" / "env.pem", "-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:2/simple/")
    monkeypatch.setenv("PIP_CERT", str(env_pem))
    assert config.index_url() == "http://127.0.0.1:2/simple"
    assert http.ca_bundle() == str(env_pem)
    assert config.pip_setting("cert") == config.PipSetting(str(env_pem), "PIP_CERT")
    assert config.index_url("http://127.0.0.1:3/simple") == "http://127.0.0.1:3/simple"
    # requests' own variable still comes before pip's
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "certs" / "xdg1.pem"))
    assert http.ca_bundle() == str(tmp_path / "certs" / "xdg1.pem")


def _pip_itself() -> tuple[str, str | None]:
    """index-url and cert as this venv's pip resolves them for `pip install`."""
    from pip._internal.commands import create_command

    options, _ = create_command("install").parse_args([])
    return str(options.index_url).rstrip("/"), options.cert


def _envlock() -> tuple[str, str | None]:
    cert = config.pip_setting("cert")
    return config.index_url(), None if cert is None else cert.value


def test_precedence_agrees_with_pip_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the real /etc/pip.conf stays in play here: pip's own parser reads it too
    _isolate(monkeypatch, tmp_path, move_etc=False)
    xdg = tmp_path / "xdg1" / "pip" / "pip.conf"
    user = tmp_path / "home" / ".config" / "pip" / "pip.conf"
    site = tmp_path / "venv" / "pip.conf"
    env_file = tmp_path / "env.conf"
    a_pem = _write(tmp_path / "a.pem", "x")
    b_pem = _write(tmp_path / "b.pem", "x")

    # [install] beats [global] even when [global] is in a later file
    _write(xdg, f"[install]\nindex-url = http://127.0.0.1:1/xdg-install\ncert = {a_pem}\n")
    _write(user, f"[global]\nindex-url = http://127.0.0.1:1/user-global\ncert = {b_pem}\n")
    assert _envlock() == _pip_itself() == ("http://127.0.0.1:1/xdg-install", str(a_pem))

    # a later file's [install] beats an earlier one's
    _write(site, "[install]\nindex-url = http://127.0.0.1:1/site-install\n")
    assert _envlock() == _pip_itself() == ("http://127.0.0.1:1/site-install", str(a_pem))

    # an empty value in a later file unsets the key: the site file's empty [install]
    # replaces the xdg one, so the user file's [global] applies again
    _write(site, "[install]\nindex-url =\n")
    assert _envlock() == _pip_itself() == ("http://127.0.0.1:1/user-global", str(a_pem))

    # PIP_CONFIG_FILE naming an existing file hides the user files (pip's rule)
    site.unlink()
    xdg.unlink()
    _write(env_file, f"[global]\ncert = {a_pem}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(env_file))
    assert _envlock() == _pip_itself()
    assert _envlock()[0] != "http://127.0.0.1:1/user-global"
    # ... and one naming a missing file does not
    monkeypatch.setenv("PIP_CONFIG_FILE", str(tmp_path / "missing.conf"))
    assert _envlock() == _pip_itself() == ("http://127.0.0.1:1/user-global", str(b_pem))

    # PIP_CONFIG_FILE=/dev/null turns every file off; variables still count
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_CERT", str(b_pem))
    assert _envlock() == _pip_itself()
    assert _envlock()[1] == str(b_pem)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:2/env")
    assert _envlock() == _pip_itself() == ("http://127.0.0.1:2/env", str(b_pem))


def test_option_names_are_normalised_like_pip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _isolate(monkeypatch, tmp_path)
    conf = _write(
        tmp_path / "pip.conf",
        "[global]\nIndex_URL = http://127.0.0.1:1/global/\n"
        "[install]\nindex-url = http://127.0.0.1:1/install/\n"
        "[wheel]\ncert = /nowhere.pem\n",
    )
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    assert config.index_url() == "http://127.0.0.1:1/install"
    assert config.pip_setting("index_url", ("global",)) == config.PipSetting(
        "http://127.0.0.1:1/global/", f"pip configuration {conf} [global]"
    )
    # only the sections asked for count
    assert config.pip_setting("cert") is None


def test_unreadable_config_is_skipped_and_a_bad_url_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _isolate(monkeypatch, tmp_path)
    conf = _write(tmp_path / "pip.conf", "index-url = no section header\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    assert config.pip_setting("index-url") is None
    conf.write_text("[global]\nindex-url = ftp://example.invalid/simple\n")
    with pytest.raises(UsageError, match=f"from pip configuration {conf} .global. is not an http"):
        config.index_url()
