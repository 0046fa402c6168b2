from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from nexusai.app import create_app
from nexusai.config import Config
from nexusai.memory.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "nexus.db") as s:
        yield s


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return Config.from_env({}, data_dir=tmp_path / "data")


@pytest.fixture
def client(config: Config) -> Iterator[TestClient]:
    with TestClient(create_app(config)) as c:
        yield c
