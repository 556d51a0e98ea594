#!/usr/bin/env python3
"""What SOURCE_DATE_EPOCH does, and does not, change with the Engine API's (classic) builder.

Builds one small two-stage context (a RUN that writes files, a COPY from the
build stage, a COPY from the context; envlock's build-time labels) through
``envlock.image.build.build_image`` (docker-py, the classic builder: no
BuildKit) in four ways, and pushes the runtime images to the local registry:

  A  SOURCE_DATE_EPOCH set, the second build from the cache
  B  SOURCE_DATE_EPOCH unset, the second build from the cache (>= 1 s later)
  C  SOURCE_DATE_EPOCH set, both builds with --no-cache
  D  SOURCE_DATE_EPOCH set to two different values, from the cache

For each pair it prints whether the image ids, the manifest digests, the
config's ``created``, the layer diff_ids (RUN layer, COPY layers) and the
``org.opencontainers.image.created`` label are equal.

    .venv/bin/python bench/source_date_epoch.py [--registry 127.0.0.1:5000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from envlock.image.build import build_image  # noqa: E402
from envlock.image.push import push  # noqa: E402

DOCKERFILE = """ARG BASE_IMAGE=envlock-test/bookworm-python:1
FROM ${BASE_IMAGE} AS build
RUN mkdir -p /opt/out && echo made > /opt/out/made.txt && python3 -c "print(1)" > /opt/out/py.txt
FROM ${BASE_IMAGE}
COPY --from=build /opt/out /opt/out
COPY data.txt /opt/data.txt
"""


def build(context: Path, tag: str, epoch: str | None, no_cache: bool) -> dict[str, Any]:
    import docker

    if epoch is None:
        os.environ.pop("SOURCE_DATE_EPOCH", None)
    else:
        os.environ["SOURCE_DATE_EPOCH"] = epoch
    result = build_image(context, tag=tag, no_cache=no_cache, network="none", progress="quiet")
    client = docker.from_env()
    try:
        attrs = client.images.get(result.image_id).attrs
    finally:
        client.close()
    return {
        "id": result.image_id,
        "created": attrs["Created"],
        "label": (attrs["Config"]["Labels"] or {}).get("org.opencontainers.image.created"),
        "layers": attrs["RootFS"]["Layers"],
        "cached": f"{result.cached_steps}/{result.cacheable_steps}",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--registry", default="127.0.0.1:5000")
    args = ap.parse_args()
    repo = f"{args.registry}/envlock-sde-{time.time_ns()}"
    with tempfile.TemporaryDirectory() as tmp:
        context = Path(tmp)
        (context / "Dockerfile").write_text(DOCKERFILE)
        (context / "data.txt").write_text("same bytes every time\n")
        cases = {
            "A epoch set, cached rebuild": (("1700000000", False), ("1700000000", False)),
            "B epoch unset, cached rebuild": ((None, False), (None, False)),
            "C epoch set, --no-cache both": (("1700000000", True), ("1700000000", True)),
            "D epoch 1700000000 then 1700000001, cached": (
                ("1700000000", False),
                ("1700000001", False),
            ),
        }
        print(
            "| case | image id | manifest digest | config created | RUN-stage COPY layer "
            "| context COPY layer | created label | steps cached (2nd) | config created (2nd) |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        n = 0
        for name, (first, second) in cases.items():
            out = []
            for epoch, no_cache in (first, second):
                n += 1
                tag = f"{repo}:b{n}"
                info = build(context, tag, epoch, no_cache)
                info["digest"] = push(tag).digest
                out.append(info)
                time.sleep(1.1)  # whole seconds: a new 'now' for the next build
            a, b = out

            def same(x: Any, y: Any) -> str:
                return "same" if x == y else "differs"

            print(
                f"| {name} | {same(a['id'], b['id'])} | {same(a['digest'], b['digest'])} "
                f"| {same(a['created'], b['created'])} | {same(a['layers'][-2], b['layers'][-2])} "
                f"| {same(a['layers'][-1], b['layers'][-1])} | {same(a['label'], b['label'])} "
                f"| {b['cached']} | {b['created'][:19]}Z |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
