"""The real service on loopback: in a thread of this process (`live_server`), or as its own
`nexus serve` process (`start_server`, `server_process`)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn
from fastapi import FastAPI

from tests.conftest import HTTP_TIMEOUT


@contextmanager
def live_server(app: FastAPI) -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(
    data_dir: Path, port: int, role: str = "all", log: str | None = None, **env: str
) -> subprocess.Popen[bytes]:
    """`nexus serve` as its own process (as deployed), once its /health answers. Entity
    extraction is off unless `env` turns it on; what it logs goes to the file `log`."""
    command = [sys.executable, "-m", "nexusai.cli", "serve", "--role", role]
    command += ["--port", str(port), "--data-dir", str(data_dir)]
    environment = {**os.environ, "NEXUS_EXTRACTOR": "none", **env}
    with open(log or os.devnull, "w") as sink:  # the child keeps its own descriptor
        process = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL, stderr=sink)
    deadline = time.monotonic() + 120
    while True:
        try:
            if (
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=HTTP_TIMEOUT).status_code
                == 200
            ):
                return process
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError(f"nexus serve --role {role} did not start")
        time.sleep(0.2)


@contextmanager
def server_process(data_dir: Path, role: str = "all", **env: str) -> Iterator[str]:
    port = free_port()
    process = start_server(data_dir, port, role, **env)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=60)
