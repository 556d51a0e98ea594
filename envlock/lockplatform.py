"""The platform a lock is made for: Linux x86_64, manylinux, one CPython minor.

The lock is never made for the machine envlock runs on. The glibc level comes
from the OS of the base image the resolution chose (the Docker image is the
tested configuration); wheels are kept when one of their tags is among the
tags such an interpreter accepts, computed with ``packaging.tags``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from functools import cached_property

from packaging.markers import Marker
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from envlock.errors import UsageError

# glibc of the base image OS families envlock knows (the target's manylinux level).
_OS_GLIBC: dict[str, tuple[int, int]] = {
    "ubuntu18.04": (2, 27),
    "ubuntu20.04": (2, 31),
    "ubuntu22.04": (2, 35),
    "ubuntu24.04": (2, 39),
    "rockylinux8": (2, 28),
    "ubi8": (2, 28),
    "rockylinux9": (2, 34),
    "ubi9": (2, 34),
    "debian12": (2, 36),
}
DEFAULT_GLIBC = (2, 28)
NEWEST_GLIBC = max(_OS_GLIBC.values())
# The newest manylinux level uv's --python-platform names.
_UV_MAX_GLIBC = (2, 40)
_UV_MIN_GLIBC = (2, 17)
_LEGACY = {(2, 17): "manylinux2014", (2, 12): "manylinux2010", (2, 5): "manylinux1"}


@dataclass(frozen=True)
class Target:
    python: str  # CPython minor, "3.11"
    glibc: tuple[int, int] = DEFAULT_GLIBC
    arch: str = "x86_64"

    @classmethod
    def for_lock(cls, python: str, os_name: str | None) -> Target:
        if not re.fullmatch(r"3\.\d+", python or ""):
            raise UsageError(
                f"cannot lock for Python {python!r}: expected a CPython minor like 3.11",
                hint="pass --python 3.11",
            )
        glibc = _OS_GLIBC.get((os_name or "").lower(), DEFAULT_GLIBC)
        return cls(python=python, glibc=glibc)

    @property
    def python_tuple(self) -> tuple[int, int]:
        major, minor = self.python.split(".")
        return int(major), int(minor)

    @property
    def cp(self) -> str:
        major, minor = self.python_tuple
        return f"cp{major}{minor}"

    @property
    def manylinux(self) -> str:
        return f"manylinux_{self.glibc[0]}_{self.glibc[1]}_{self.arch}"

    def platforms(self) -> list[str]:
        """Platform tags, most specific first, down to manylinux1."""
        major, top = self.glibc
        out: list[str] = []
        for minor in range(top, 4, -1):
            out.append(f"manylinux_{major}_{minor}_{self.arch}")
            legacy = _LEGACY.get((major, minor))
            if legacy:
                out.append(f"{legacy}_{self.arch}")
        return out

    @property
    def uv_platform(self) -> str:
        level = min(max(self.glibc, _UV_MIN_GLIBC), _UV_MAX_GLIBC)
        return f"{self.arch}-manylinux_{level[0]}_{level[1]}"

    @cached_property
    def tags(self) -> frozenset[Tag]:
        plats = self.platforms()
        # CPython before 3.8 was built with pymalloc, whose ABI tag ends in "m"
        abi = f"{self.cp}m" if self.python_tuple < (3, 8) else self.cp
        found = set(cpython_tags(self.python_tuple, abis=[abi], platforms=plats))
        found.update(compatible_tags(self.python_tuple, interpreter=self.cp, platforms=plats))
        return frozenset(found)

    def wheel_ok(self, filename: str) -> bool:
        try:
            _, _, _, tags = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            return False
        return not tags.isdisjoint(self.tags)

    def marker_environment(self) -> dict[str, str]:
        return {
            "implementation_name": "cpython",
            "implementation_version": f"{self.python}.0",
            "os_name": "posix",
            "platform_machine": self.arch,
            "platform_python_implementation": "CPython",
            "platform_release": "",
            "platform_system": "Linux",
            "platform_version": "",
            "python_full_version": f"{self.python}.0",
            "python_version": self.python,
            "sys_platform": "linux",
        }

    def marker_ok(self, marker: str | None) -> bool:
        if not marker:
            return True
        return Marker(marker).evaluate(self.marker_environment())

    @property
    def environment(self) -> str:
        """PEP 751 ``environments`` entry for this target. ``platform_system`` beside
        ``sys_platform``: PDM (2.29) reads a lock's platform only from
        ``platform_system`` and ``platform_machine`` and refuses the lock otherwise
        ("Unsupported platform marker"); pip and uv evaluate either."""
        return (
            f"sys_platform == 'linux' and platform_system == 'Linux' and "
            f"platform_machine == '{self.arch}' and "
            f"implementation_name == 'cpython' and python_version == '{self.python}'"
        )

    def describe(self) -> str:
        return f"CPython {self.python}, Linux {self.arch}, {self.manylinux}"


@functools.cache
def newest_linux(python: str) -> Target:
    """CPython ``python`` on Linux x86_64 with the newest glibc a base image has:
    it accepts every wheel some lock envlock makes could install (matrix refresh)."""
    return Target(python=python, glibc=NEWEST_GLIBC)
