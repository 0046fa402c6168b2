from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nexusai.cli import cli
from nexusai.config import Config
from nexusai.llm import OpenAIChat
from nexusai.memory.service import Memory
from nexusai.models import NewEpisode
from nexusai.orchestration.settings import SettingsStore
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
    assert again.vectors.count() == 5
    assert again.count_pending_vectors() == 0
    again.close()


def test_bad_config_is_one_clean_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEXUS_PORT", "eighty")
    result = CliRunner().invoke(cli, ["serve", "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "NEXUS_PORT must be a number" in result.output
    assert "Traceback" not in result.output


def test_settings_context_and_chat_against_a_running_service(
    config: Config, embedder: SwitchableEmbedder
) -> None:
    from nexusai.app import create_app
    from tests.live_server import live_server
    from tests.openai_stub import openai_stub

    runner = CliRunner()
    with (
        openai_stub() as (llm_url, _),
        live_server(create_app(config, embedder, OpenAIChat(llm_url, "m"))) as url,
    ):
        import httpx

        sid = httpx.post(f"{url}/sessions").json()["id"]
        httpx.post(
            f"{url}/sessions/{sid}/episodes",
            json={"speaker": "user", "content": "I adopted a puppy called Biscuit"},
        )
        result = runner.invoke(
            cli, ["settings", "set", "keywordWeight=1", "recentLimit=0", "--url", url]
        )
        assert result.exit_code == 0, result.output
        assert "keywordWeight = 1" in result.output
        result = runner.invoke(cli, ["settings", "set", "keywordWeight=9", "--url", url])
        assert result.exit_code == 1
        assert "keywordWeight must be from 0 to 5" in result.output
        result = runner.invoke(
            cli, ["context", "--session", str(sid), "--explain", "Biscuit?", "--url", url]
        )
        assert result.exit_code == 0, result.output
        assert "puppy" in result.output
        assert "0.0328" in result.output  # 1/61 + 1/61
        result = runner.invoke(cli, ["entities", "--session", str(sid), "--url", url])
        assert result.exit_code == 0, result.output
        assert "entities seen by session" in result.output
        result = runner.invoke(
            cli, ["chat", "--session", str(sid), "--url", url], input="dog name?\n\n"
        )
        assert result.exit_code == 0, result.output
        assert "Your dog is called Biscuit." in result.output


def test_cli_without_a_service_says_how_to_start_one() -> None:
    result = CliRunner().invoke(cli, ["settings", "get", "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 1
    assert "nexus serve" in result.output


def test_eval_locomo_smoke_on_one_conversation(tmp_path: Path) -> None:
    """The real evaluation path on one real conversation: imports, asks, writes JSON."""
    import json

    data = Path(__file__).parents[2] / "shared" / "data" / "locomo" / "locomo10.json"
    if not data.exists():
        pytest.skip("the LoCoMo data is not beside the checkout")
    out = tmp_path / "result.json"
    data_dir = tmp_path / "data"  # a store whose settings the user changed
    settings = SettingsStore(Config.from_env({}, data_dir=data_dir).db_path)
    settings.update({"semanticWeight": 0.5, "keywordWeight": 2})
    settings.close()
    result = CliRunner(env={"NEXUS_DATA_DIR": str(data_dir)}).invoke(
        cli,
        [
            "eval",
            "locomo",
            "--data",
            str(data),
            "--conversations",
            "conv-26",
            "--k",
            "5,10",
            "--json",
            str(out),
            "--plot",
            str(tmp_path / "plot.png"),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["conversations"] == ["conv-26"]
    assert report["questions"] > 150
    pairs = {(r["semanticWeight"], r["keywordWeight"]): r for r in report["results"]}
    assert report["configured"] == {"semanticWeight": 0.5, "keywordWeight": 2.0}
    assert report["recommended"] == {"semanticWeight": 0.25, "keywordWeight": 5.0}
    assert {(1.0, 0.0), (0.0, 1.0), (0.5, 2.0), (0.25, 5.0)} <= set(pairs)
    assert report["semanticLimit"] == "k"
    assert "0.5+" in result.output
    assert "0.25*" in result.output
    for row in pairs.values():
        assert 0.0 <= row["recall"]["5"] <= row["recall"]["10"] <= 1.0
        assert set(row["byCategory"]) == {
            "multi-hop",
            "temporal",
            "open-domain",
            "single-hop",
            "adversarial",
        }
    # a sanity floor far below what it measures, so a broken retrieval path fails here
    assert pairs[(0.0, 1.0)]["recall"]["10"] > 0.4
    assert (tmp_path / "plot.png").stat().st_size > 10_000


def test_configured_weights_are_the_defaults_without_a_store(tmp_path: Path) -> None:
    from nexusai.evaluation.report import configured_weights

    config = Config.from_env({}, data_dir=tmp_path / "nothing-here")
    assert configured_weights(config) == (1.0, 0.0)
    assert not (tmp_path / "nothing-here").exists()  # looking created nothing


def test_eval_depth_below_the_largest_k_is_a_clean_error(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    data.write_text("[]")
    result = CliRunner().invoke(cli, ["eval", "locomo", "--data", str(data), "--depth", "10"])
    assert result.exit_code == 1
    assert "--depth 10 is less than the largest k (20)" in result.output
    assert "Traceback" not in result.output
