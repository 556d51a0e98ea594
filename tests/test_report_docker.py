"""--image REF through the real Docker Engine: ids, drift, missing images, no daemon."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from docker_support import build_test_image
from report_support import cli, decode, make_keys, smoke_result


@pytest.fixture(scope="module")
def other_image(base_image: str) -> Iterator[str]:
    """A second local image, made from the base with one label (no RUN, fast)."""
    import docker

    client = docker.from_env()
    dockerfile = f"FROM {base_image}\nLABEL io.envlock.test=report-drift\n".encode()
    image, _ = build_test_image(
        client,
        fileobj=io.BytesIO(dockerfile),
        tag="envlock-test/report-other:1",
        rm=True,
        network_mode="none",
    )
    yield "envlock-test/report-other:1"
    client.images.remove(image.id, force=True)
    client.close()


@pytest.mark.docker
def test_image_subject_is_the_local_image_id(
    tmp_path: Path, base_image: str, other_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import docker

    client = docker.from_env()
    base_id = client.images.get(base_image).id
    other_id = client.images.get(other_image).id
    client.close()
    assert base_id != other_id

    priv, pub = make_keys(tmp_path)
    result = tmp_path / "result.json"
    result.write_text(json.dumps(smoke_result()))
    report = tmp_path / "r.json"
    code, out, err = cli(
        capsys,
        "report",
        "sign",
        str(result),
        "--key",
        str(priv),
        "--image",
        base_image,
        "-o",
        str(report),
    )
    assert code == 0, err
    subject = decode(json.loads(report.read_text()))["subject"]
    assert subject == [{"name": base_image, "digest": {"sha256": base_id.removeprefix("sha256:")}}]

    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub), "--image", base_image)
    assert code == 0, err
    assert f"image      {base_image}: matches the report" in out

    code, out, err = cli(
        capsys, "verify", str(report), "--key", str(pub), "--image", other_image, "--json"
    )
    assert code == 1
    doc = json.loads(out)
    assert doc["drift"] == [
        {"field": "subject.digest.sha256", "report": base_id, "actual": other_id}
    ]
    assert "NOT VERIFIED: subject.digest.sha256 drifted" in err


@pytest.mark.docker
def test_missing_image_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    priv, _ = make_keys(tmp_path)
    result = tmp_path / "result.json"
    result.write_text(json.dumps(smoke_result()))
    code, _, err = cli(
        capsys,
        "report",
        "sign",
        str(result),
        "--key",
        str(priv),
        "--image",
        "envlock-test/does-not-exist:0",
        "-o",
        str(tmp_path / "r.json"),
    )
    assert code == 2
    assert err.startswith("envlock: error: no local image 'envlock-test/does-not-exist:0'")
    assert not (tmp_path / "r.json").exists()


def test_no_docker_daemon_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    priv, pub = make_keys(tmp_path)
    result = tmp_path / "result.json"
    result.write_text(json.dumps(smoke_result()))
    code, _, err = cli(
        capsys,
        "report",
        "sign",
        str(result),
        "--key",
        str(priv),
        "--image",
        "some/image:1",
        "-o",
        str(tmp_path / "r.json"),
    )
    assert code == 3
    assert err.startswith("envlock: error: cannot reach the Docker Engine")
    assert "Traceback" not in err
