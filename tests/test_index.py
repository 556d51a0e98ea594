"""envlock.index: where the index is, from the environment and pip's configuration."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from envlock import index
from envlock.errors import UsageError


def _no_index_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "xdg"))
    # a pip.conf inside the running venv would come after the user's file
    monkeypatch.setattr(sys, "prefix", sys.base_prefix)


def test_pip_config_file_last_section_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_index_env(monkeypatch, tmp_path)
    conf = tmp_path / "pip.conf"
    conf.write_text(
        "[global]\nindex-url = http://127.0.0.1:1/global/\n"
        "[install]\nindex-url = http://127.0.0.1:1/install/\n"
    )
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    assert index.index_url() == "http://127.0.0.1:1/install"
    assert index.pip_config_option(conf, "index-url", ("global",)) == "http://127.0.0.1:1/global/"
    assert index.pip_config_option(conf, "cert", ("global", "install")) is None
    assert index.pip_config_option(tmp_path / "missing.conf", "index-url", ("global",)) is None


def test_user_file_overrides_and_environment_overrides_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_index_env(monkeypatch, tmp_path)
    monkeypatch.delenv("PIP_CONFIG_FILE", raising=False)
    user = tmp_path / "home" / ".config" / "pip" / "pip.conf"
    user.parent.mkdir(parents=True)
    user.write_text("[global]\nindex-url = file:///srv/simple\n")
    system_wide = tmp_path / "xdg" / "pip" / "pip.conf"
    system_wide.parent.mkdir(parents=True)
    system_wide.write_text("[global]\nindex-url = http://127.0.0.1:1/xdg\n")
    assert index.index_url() == "file:///srv/simple"
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:2/simple/")
    assert index.index_url() == "http://127.0.0.1:2/simple"
    assert index.index_url("http://127.0.0.1:3/simple") == "http://127.0.0.1:3/simple"


def test_unreadable_config_is_skipped_and_a_bad_url_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_index_env(monkeypatch, tmp_path)
    conf = tmp_path / "pip.conf"
    conf.write_text("index-url = no section header\n")
    assert index.pip_config_option(conf, "index-url", ("global",)) is None
    conf.write_text("[global]\nindex-url = ftp://example.invalid/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    with pytest.raises(UsageError, match="from pip configuration is not an http"):
        index.index_url()
