from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nexusai.cli import cli
from nexusai.config import Config
from nexusai.memory.models import NewEpisode
from nexusai.memory.service import Memory
from tests.conftest import SwitchableEmbedder


def test_reindex_rebuilds_every_vector(
    config: Config, embedder: SwitchableEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = Memory.open(config, embedder)
    sid = first.store.create_session().id
    embedder.failing = True
    first.add_episodes(sid, [NewEpisode("u", f"message {i}") for i in range(5)])
    first.close()
    monkeypatch.setenv("NEXUS_DATA_DIR", str(config.data_dir))
    result = CliRunner().invoke(cli, ["reindex"])
    assert result.exit_code == 0, result.output
    assert "rebuilt 5 vectors" in result.output
    again = Memory.open(config, embedder)
    assert again.vectors.count() == 5 and again.store.count_pending_vectors() == 0
    again.close()


def test_bad_config_is_one_clean_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEXUS_PORT", "eighty")
    result = CliRunner().invoke(cli, ["serve", "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "NEXUS_PORT must be a number" in result.output
    assert "Traceback" not in result.output
