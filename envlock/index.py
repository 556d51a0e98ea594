"""Where the package index is: the user's pip/uv configuration, or --index-url.

No index host name is written in envlock. The location comes, in order, from
the command line, UV_DEFAULT_INDEX / UV_INDEX_URL, PIP_INDEX_URL, the
``index-url`` of pip's configuration files, and finally pip's own built-in
default (the index pip itself would use on this machine).
"""

from __future__ import annotations

import configparser
import os
import sys
from pathlib import Path

from envlock.errors import UsageError


def _pip_config_files() -> list[Path]:
    files: list[Path] = [Path("/etc/pip.conf")]
    xdg_dirs = os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(":")
    files += [Path(d) / "pip" / "pip.conf" for d in xdg_dirs if d]
    home = Path.home()
    files.append(home / ".pip" / "pip.conf")
    xdg_home = Path(os.environ.get("XDG_CONFIG_HOME", home / ".config"))
    files.append(xdg_home / "pip" / "pip.conf")
    if sys.prefix != sys.base_prefix:
        files.append(Path(sys.prefix) / "pip.conf")
    env_file = os.environ.get("PIP_CONFIG_FILE")
    if env_file and env_file != os.devnull:
        files.append(Path(env_file))
    return files


def pip_config_option(path: Path, option: str, sections: tuple[str, ...]) -> str | None:
    """``option`` from one pip configuration file, the last of ``sections`` that sets it.

    None when the file is missing, unreadable or does not set it.
    """
    if not path.is_file():
        return None
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError):
        return None
    found: str | None = None
    for section in sections:
        if parser.has_option(section, option):
            found = parser.get(section, option).strip()
    return found


def _from_pip_config() -> str | None:
    found: str | None = None
    for path in _pip_config_files():
        value = pip_config_option(path, "index-url", ("global", "install", "download"))
        if value is not None:
            found = value
    return found


def _pip_default() -> str | None:
    try:
        from pip._internal.models.index import PyPI
    except Exception:  # pragma: no cover - pip missing from this interpreter
        return None
    return str(PyPI.simple_url)


def _validate(url: str, origin: str) -> str:
    url = url.strip()
    if not url.startswith(("http://", "https://", "file://")):
        raise UsageError(
            f"index URL {url!r} from {origin} is not an http(s) or file URL",
            hint="pass --index-url https://your.index/simple",
        )
    return url.rstrip("/")


def index_url(cli_value: str | None = None) -> str:
    """The simple-API base URL envlock talks to (no trailing slash)."""
    if cli_value:
        return _validate(cli_value, "--index-url")
    for var in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        value = os.environ.get(var)
        if value:
            return _validate(value, var)
    configured = _from_pip_config()
    if configured:
        return _validate(configured, "pip configuration")
    default = _pip_default()
    if default:
        return _validate(default, "pip's default")
    raise UsageError(
        "no package index is configured",
        hint="pass --index-url, or set index-url in pip.conf or PIP_INDEX_URL",
    )
