"""`pip install nexusai` as a user does it: the wheel, into a fresh venv, with no extras,
gives a `nexus` that serves (no torch, no test tools, no model download)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import HTTP_TIMEOUT
from tests.live_server import free_port

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]
ROOT = Path(__file__).parents[1]
PIP = ["-m", "pip", "--disable-pip-version-check", "--quiet"]


def _wheel(tmp_path: Path) -> Path:
    """Built from a copy of the sources, so the checkout gets no build folders."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "src", source / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__")
    )
    wheels = tmp_path / "wheels"
    _run(sys.executable, *PIP, "wheel", "--no-deps", "--no-build-isolation", "-w", wheels, source)
    [wheel] = wheels.glob("nexusai-*.whl")
    return wheel


def test_the_wheel_alone_installs_a_working_nexus(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=120)
    python = venv / "bin" / "python"
    # The runtime lock pins what pip would choose anyway, so the test installs what users do.
    lock = ROOT / "requirements-runtime.lock"
    _run(python, *PIP, "install", "--no-compile", "-c", lock, _wheel(tmp_path))
    installed = subprocess.run(
        [python, *PIP, "freeze"], capture_output=True, text=True, check=True
    ).stdout.lower()
    for heavy in ("torch", "sentence-transformers", "pytest", "mypy", "playwright"):
        assert f"{heavy}==" not in installed, f"{heavy} came with the runtime install"
    port = free_port()
    serve = subprocess.Popen(
        [venv / "bin" / "nexus", "serve", "--port", str(port), "--data-dir", tmp_path / "data"],
        env={"PATH": str(venv / "bin"), "HOME": str(tmp_path), "NEXUS_EXTRACTOR": "spacy"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert _health(port, serve)["status"] == "ok"
    finally:
        serve.terminate()
        serve.wait(timeout=60)
        if serve.stderr:
            serve.stderr.close()


def _run(*command: str | Path) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr


def _health(port: int, serve: subprocess.Popen[bytes]) -> dict[str, object]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if serve.poll() is not None:
            pytest.fail(
                f"nexus serve exited: {serve.stderr.read().decode() if serve.stderr else ''}"
            )
        try:
            answer = httpx.get(f"http://127.0.0.1:{port}/health", timeout=HTTP_TIMEOUT)
            if answer.status_code == 200:
                return dict(answer.json())
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    pytest.fail("nexus serve did not answer /health within 120 s")
