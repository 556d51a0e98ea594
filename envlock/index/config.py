"""Where the package index is: the user's pip/uv configuration, or --index-url.

No index host name is written in envlock. The location comes, in order, from
the command line, UV_DEFAULT_INDEX / UV_INDEX_URL, pip's ``index-url`` setting
(PIP_INDEX_URL, then pip's configuration files, in pip's own precedence), and
finally pip's own built-in default (the index pip itself would use here).

``pip_setting`` is envlock's one reader of pip's configuration; the CA bundle
(``cert``, in envlock.index.http) is read through it too.
"""

from __future__ import annotations

import configparser
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from envlock.door import bad_character, redact, shown
from envlock.errors import UsageError

# pip's configuration, read the way pip reads it. The order is pip's own
# (pip 23.2, pip/_internal/configuration.py and pip/_internal/cli/parser.py):
# - files load in the order GLOBAL, USER, SITE, ENV (OVERRIDE_ORDER), and a
#   later file wins over an earlier one for the same "section.option" key;
# - GLOBAL is each $XDG_CONFIG_DIRS entry (default /etc/xdg) + pip/pip.conf,
#   then /etc/pip.conf (appdirs.site_config_dirs);
# - USER is ~/.pip/pip.conf, then $XDG_CONFIG_HOME (default ~/.config)
#   + pip/pip.conf; pip skips both when PIP_CONFIG_FILE names an existing file
#   (Configuration.iter_config_files);
# - SITE is <prefix>/pip.conf of the Python that runs pip;
# - ENV is $PIP_CONFIG_FILE; PIP_CONFIG_FILE=/dev/null turns all files off;
# - PIP_<OPTION> environment variables beat every file;
# - per command, the [<command>] section beats [global] whichever files they
#   came from (_get_ordered_configuration_items: "global", command, ":env:"),
#   and an empty value counts as unset.
# envlock fetches what `pip install` / `pip download` would, so it reads
# [global], then [install], then [download] (the later wins).
PIP_SECTIONS = ("global", "install", "download")
_ETC_DIR = Path("/etc")  # pip's fixed system-wide directory on Unix; tests move it
_ENV_SECTION = ":env:"


@dataclass(frozen=True)
class PipSetting:
    """One effective pip setting and where it came from (for messages)."""

    value: str
    origin: str


def _option_name(name: str) -> str:
    """pip's key normalisation: case-insensitive, '_' and '-' alike."""
    return name.lower().replace("_", "-")


def pip_config_files() -> list[Path]:
    """pip's configuration files on this machine in pip's load order (a later one wins)."""
    env_file = os.environ.get("PIP_CONFIG_FILE")
    if env_file == os.devnull:
        return []
    xdg_dirs = os.environ.get("XDG_CONFIG_DIRS", "")
    if not xdg_dirs.strip():
        xdg_dirs = "/etc/xdg"
    files = [Path(d).expanduser() / "pip" / "pip.conf" for d in xdg_dirs.split(os.pathsep) if d]
    files.append(_ETC_DIR / "pip.conf")
    if not (env_file and os.path.exists(env_file)):
        home = Path.home()
        files.append(home / ".pip" / "pip.conf")
        xdg_home = os.environ.get("XDG_CONFIG_HOME", "")
        user_dir = Path(xdg_home) if xdg_home.strip() else home / ".config"
        files.append(user_dir / "pip" / "pip.conf")
    # pip reads the pip.conf of the environment it runs in: the active virtual
    # environment's pip when one is active, else the one envlock runs in.
    files.append(Path(os.environ.get("VIRTUAL_ENV") or sys.prefix) / "pip.conf")
    if env_file:
        files.append(Path(env_file))
    return files


def _read_config(path: Path) -> configparser.RawConfigParser | None:
    """A parsed pip configuration file; None when missing, unreadable or malformed."""
    if not path.is_file():
        return None
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return None
    return parser


def pip_setting(option: str, sections: tuple[str, ...] = PIP_SECTIONS) -> PipSetting | None:
    """The value pip would use for ``option`` (e.g. "index-url", "cert"), or None.

    ``sections`` in increasing precedence; PIP_<OPTION> beats them all.
    """
    wanted = _option_name(option)
    by_section: dict[str, PipSetting] = {}
    for path in pip_config_files():
        parser = _read_config(path)
        if parser is None:
            continue
        for section in parser.sections():
            if section not in sections:
                continue
            for name, value in parser.items(section):
                if _option_name(name) == wanted:
                    by_section[section] = PipSetting(
                        value.strip(), f"pip configuration {path} [{section}]"
                    )
    for key, value in os.environ.items():
        if key.startswith("PIP_") and _option_name(key[4:]) == wanted:
            by_section[_ENV_SECTION] = PipSetting(value.strip(), key)
    found: PipSetting | None = None
    for section in (*sections, _ENV_SECTION):
        setting = by_section.get(section)
        if setting is not None and setting.value:
            found = setting
    return found


def _pip_default() -> str | None:
    try:
        from pip._internal.models.index import PyPI
    except Exception:  # pragma: no cover - pip missing from this interpreter
        return None
    return str(PyPI.simple_url)


def _validate(url: str, origin: str) -> str:
    """The index URL, when it is one line of an http(s) or file URL; never echoes a password."""
    url = url.strip(" ")
    problem = None
    bad = bad_character(url)
    if bad is not None:
        problem = f"holds the control character {bad}"
    elif any(ch.isspace() for ch in url):
        problem = "holds a space"
    elif not url.startswith(("http://", "https://", "file://")):
        problem = "is not an http(s) or file URL"
    if problem is not None:
        raise UsageError(
            f"index URL {shown(url)} from {origin} {problem}",
            hint="pass --index-url https://your.index/simple (one URL, no spaces or newlines)",
        )
    return url.rstrip("/")


__all__ = ["index_url", "pip_config_files", "pip_setting", "redact"]


def index_url(cli_value: str | None = None) -> str:
    """The simple-API base URL envlock talks to (no trailing slash)."""
    if cli_value:
        return _validate(cli_value, "--index-url")
    for var in ("UV_DEFAULT_INDEX", "UV_INDEX_URL"):
        value = os.environ.get(var)
        if value:
            return _validate(value, var)
    configured = pip_setting("index-url")
    if configured is not None:
        return _validate(configured.value, configured.origin)
    default = _pip_default()
    if default:
        return _validate(default, "pip's default")
    raise UsageError(
        "no package index is configured",
        hint="pass --index-url, or set index-url in pip.conf or PIP_INDEX_URL",
    )


if __name__ == "__main__":
    # `python -m envlock.index.config`: the index uv is handed where pip's
    # configuration is not read (scripts/ensure-venv.sh, tests/pythons.sh)
    print(index_url())
