"""The base image's end of life as data: found once in cuda.toml
(``CudaMatrix.end_of_life``), carried on the Resolution, worded by resolve
(``image_warnings``) and by render (the Dockerfile's END OF LIFE note), never
found again by searching the words."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from envlock.lock import read_lock
from envlock.matrix import cuda, read_toml
from envlock.model import ImageEndOfLife, Resolution
from envlock.render import RenderOptions, render_bundle
from envlock.render.context import bundle_context
from envlock.resolve import Constraints, resolve
from envlock.resolve.explain import image_warnings

GOLDEN = Path(__file__).resolve().parent / "golden" / "render"


def _cuda() -> cuda.CudaMatrix:
    doc, _digest, shown = read_toml("cuda.toml")
    return cuda.parse(doc, shown)


def test_each_state_of_cuda_toml_as_data() -> None:
    matrix = _cuda()
    assert matrix.end_of_life("10.1") == ImageEndOfLife(
        "10.1", "deleted", "CUDA 10 images were deleted from Docker Hub in 2023"
    )
    assert matrix.end_of_life("11.8") == ImageEndOfLife(
        "11.8", "eol", "CUDA 11 drivers reached end of life in July 2024"
    )
    assert matrix.end_of_life("12.2") == ImageEndOfLife(
        "12.2", "supported", branch="R535", ends="2026-06"
    )
    assert matrix.end_of_life("9.9") is None


@pytest.mark.parametrize(
    ("eol", "words"),
    [
        (None, []),
        (
            ImageEndOfLife("10.1", "deleted", "gone since 2023"),
            ["REF is gone: gone since 2023; build from a mirror that still has it (--base-image)"],
        ),
        (
            ImageEndOfLife("11.8", "eol", "drivers ended"),
            [
                "REF is end-of-life (drivers ended); NVIDIA deletes end-of-life tags six months "
                "later: pin it by digest or mirror it"
            ],
        ),
        (
            ImageEndOfLife("12.2", "supported", branch="R535", ends="2026-06"),
            [
                "REF: CUDA 12.2 shipped with driver branch R535, supported until 2026-06; "
                "NVIDIA deletes the tags six months after that: pin it by digest or mirror it"
            ],
        ),
    ],
)
def test_resolve_words_each_state(eol: ImageEndOfLife | None, words: list[str]) -> None:
    assert image_warnings(eol, "REF") == words


def test_the_resolution_carries_it_and_the_lock_does_not_record_it() -> None:
    res = resolve(Constraints(spec="tensorflow==2.14.1", python="3.11", cuda_source="system"))
    assert res.image_end_of_life == ImageEndOfLife(
        "11.8", "eol", "CUDA 11 drivers reached end of life in July 2024"
    )
    assert image_warnings(res.image_end_of_life, res.base_image)[0] in res.warnings
    assert "image_end_of_life" not in res.to_dict()
    again = Resolution.from_dict(res.to_dict())
    assert again == res and again.image_end_of_life is None


@pytest.mark.parametrize("case", ["tf2.14-system", "tf2.15-system", "tf2.10-system"])
def test_render_reads_the_data_or_finds_it_again_alike(case: str) -> None:
    """A lock read from its file (no end of life recorded) renders as one that carries
    it; the END OF LIFE lines are the ones the data says, and a changed note shows."""
    folder = GOLDEN / case
    lock = read_lock(folder)
    files = {n: (folder / n).read_bytes() for n in ("pylock.toml", "requirements.txt")}
    assert lock.resolution.image_end_of_life is None
    eol = _cuda().end_of_life(".".join(lock.resolution.cuda_image_version.split(".")[:2]))
    carried = replace(lock, resolution=replace(lock.resolution, image_end_of_life=eol))
    plain = render_bundle(lock, RenderOptions(), files)
    assert render_bundle(carried, RenderOptions(), files) == plain
    ctx = bundle_context(lock, RenderOptions(), files)
    if eol is not None and eol.state == "eol":
        assert [str(n) for n in ctx.end_of_life] == image_warnings(eol, lock.resolution.base_image)
        assert f"# END OF LIFE: {ctx.end_of_life[0]}" in str(plain["Dockerfile"])
    else:
        assert ctx.end_of_life == ()
    # the data decides, not words: a deleted image gets render's own note
    gone = replace(
        lock,
        resolution=replace(lock.resolution, image_end_of_life=ImageEndOfLife("x", "deleted", "n")),
    )
    notes = [str(n) for n in bundle_context(gone, RenderOptions(), files).end_of_life]
    assert notes == [
        "the nvidia/cuda x images were deleted (n); NVIDIA deletes end-of-life tags six months "
        f"after end of life, so {lock.resolution.base_image.split('@')[0]} may vanish: copy it "
        "to your own registry and render with --base-image"
    ]
