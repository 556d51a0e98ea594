"""An nvidia/cuda image's ``NVIDIA_REQUIRE_CUDA``, read and evaluated.

The NVIDIA container toolkit checks this variable before it starts a
container: space-separated alternatives, any one of which is enough, each a
comma-separated list of conditions that must all hold (``cuda>=12.6``,
``brand=tesla,driver>=535,driver<536``). The first alternative names the CUDA
the driver must support; the others are the per-branch, per-brand exceptions
under which the image's forward-compatibility libraries stand in for a newer
driver. ``parse_require`` reads the text; ``Require.admits`` says whether a
driver (and, where it matters, the GPU's brand) passes.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

_CONDITION = re.compile(r"^(cuda|driver|brand|arch)(>=|<=|!=|=|>|<)([A-Za-z0-9.]+)$")

# the brands NVML reports for each market of matrices/gpus.toml
MARKET_BRANDS: dict[str, frozenset[str]] = {
    "datacenter": frozenset({"tesla", "nvidia"}),
    "geforce": frozenset({"geforce", "geforcertx", "titan", "titanrtx"}),
    "workstation": frozenset({"quadro", "quadrortx", "nvidiartx", "nvidia"}),
}


def market_of_brand(brand: str | None) -> str | None:
    """The market of a brand NVML reported (data-center first: "nvidia" is the brand
    of A100/H100-class GPUs); None for the virtual-GPU and other brands."""
    for market in ("datacenter", "geforce", "workstation"):
        if brand and brand in MARKET_BRANDS[market]:
            return market
    return None


class RequireError(ValueError):
    """The text is not an NVIDIA_REQUIRE_CUDA value."""


@dataclass(frozen=True)
class Condition:
    key: str  # cuda, driver, brand, arch
    op: str
    value: str

    def holds(self, driver: Version, driver_cuda: Version, brands: Collection[str]) -> bool:
        if self.key == "brand":
            found = self.value in brands
            return found if self.op == "=" else not found
        if self.key == "arch":
            return True  # the images checked here are for x86_64
        have = driver if self.key == "driver" else driver_cuda
        want = Version(self.value)
        return {
            ">=": have >= want,
            "<=": have <= want,
            ">": have > want,
            "<": have < want,
            "=": have == want,
            "!=": have != want,
        }[self.op]


@dataclass(frozen=True)
class Require:
    text: str
    alternatives: tuple[tuple[Condition, ...], ...]

    @property
    def cuda(self) -> str:
        """The CUDA the first alternative asks the driver to support: "12.6"."""
        for alternative in self.alternatives:
            for cond in alternative:
                if cond.key == "cuda" and cond.op == ">=":
                    return cond.value
        return ""

    def branches(self, brands: Collection[str]) -> tuple[int, ...]:
        """Driver branches excepted for any of ``brands``: (470, 535, 550)."""
        out: set[int] = set()
        for alternative in self.alternatives:
            keys = {c.key for c in alternative}
            if "brand" not in keys or "cuda" in keys:
                continue
            if not any(c.key == "brand" and c.op == "=" and c.value in brands for c in alternative):
                continue
            for cond in alternative:
                if cond.key == "driver" and cond.op == ">=":
                    out.add(Version(cond.value).major)
        return tuple(sorted(out))

    def admits(self, driver: Version, driver_cuda: Version, brands: Collection[str]) -> bool:
        """Whether the container toolkit starts the image on this driver and GPU."""
        return any(
            all(c.holds(driver, driver_cuda, brands) for c in alternative)
            for alternative in self.alternatives
        )


def parse_require(text: str) -> Require:
    """Read an NVIDIA_REQUIRE_CUDA value; RequireError when it is not one."""
    alternatives: list[tuple[Condition, ...]] = []
    for part in text.split():
        conditions: list[Condition] = []
        for item in part.split(","):
            m = _CONDITION.fullmatch(item)
            if not m:
                raise RequireError(f"{item!r} is not a condition like cuda>=12.6 or brand=tesla")
            key, op, value = m.groups()
            if key in ("cuda", "driver"):
                try:
                    Version(value)
                except InvalidVersion:
                    raise RequireError(f"{item!r}: {value!r} is not a version") from None
            conditions.append(Condition(key, op, value))
        alternatives.append(tuple(conditions))
    if not alternatives:
        raise RequireError("empty")
    require = Require(text, tuple(alternatives))
    if not require.cuda:
        raise RequireError("no cuda>=X.Y alternative")
    return require
