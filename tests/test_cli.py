from __future__ import annotations

import re
from pathlib import Path

import click
import httpx
import pytest
from click.testing import CliRunner

from nexusai.cli import cli
from nexusai.cli.common import require_extra
from nexusai.config import Config
from nexusai.llm import OpenAIChat
from nexusai.memory.service import Memory
from nexusai.models import NewEpisode
from nexusai.orchestration.settings import SettingsStore
from tests.conftest import HTTP_TIMEOUT, SwitchableEmbedder
from tests.live_server import free_port


def test_reindex_rebuilds_every_vector(
    config: Config, embedder: SwitchableEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = Memory.open(config, embedder)
    sid = first.store.sessions.create().id
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


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"NEXUS_PORT": "eighty"}, "NEXUS_PORT must be a number"),
        ({"NEXUS_EMBEDDER": "foo"}, "NEXUS_EMBEDDER must be one of"),
        ({"NEXUS_EMBEDDER": "openai"}, "needs NEXUS_EMBEDDER_BASE_URL"),
        ({"NEXUS_EXTRACTOR": "foo"}, "NEXUS_EXTRACTOR must be one of"),
        ({"NEXUS_EXTRACTOR": "llm"}, "needs NEXUS_LLM_BASE_URL"),
        ({"NEXUS_QDRANT_URL": "http://127.0.0.1:{closed}"}, "cannot use the Qdrant server"),
        ({"NEXUS_LOG_FORMAT": "xml"}, "NEXUS_LOG_FORMAT must be text or json"),
        ({"NEXUS_MAX_BODY_BYTES": "1"}, "NEXUS_MAX_BODY_BYTES must be between"),
        ({"NEXUS_LLM_TIMEOUT": "0"}, "NEXUS_LLM_TIMEOUT must be a positive"),
        ({"NEXUS_LLM_TIMEOUT": "nan"}, "NEXUS_LLM_TIMEOUT must be a finite number"),
        ({"NEXUS_EMBEDDER_TIMEOUT": "inf"}, "NEXUS_EMBEDDER_TIMEOUT must be a finite number"),
        ({"NEXUS_MEMORY_TIMEOUT": "-Infinity"}, "NEXUS_MEMORY_TIMEOUT must be a finite number"),
        ({"NEXUS_WARM_SECONDS": "NaN"}, "NEXUS_WARM_SECONDS must be a finite number"),
        ({"NEXUS_WARM_SECONDS": "-1"}, "NEXUS_WARM_SECONDS must be between 0 and 3600"),
        ({"NEXUS_VECTOR_MEMORY": "disk"}, "NEXUS_VECTOR_MEMORY must be compact or ram"),
        ({"NEXUS_ROLE_UNDER_TEST": "orchestration"}, "needs NEXUS_MEMORY_URL"),
    ],
)
def test_a_bad_setting_at_start_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], says: str
) -> None:
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("it should not start"))
    role = env.pop("NEXUS_ROLE_UNDER_TEST", "all")
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(closed=free_port()))
    monkeypatch.setenv("NEXUS_EXTRACTOR", env.get("NEXUS_EXTRACTOR", "none"))
    args = ["serve", "--data-dir", str(tmp_path), "--port", str(free_port()), "--role", role]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert result.output.count("\n") == 1, result.output  # one line, no traceback
    assert result.output.startswith("Error: ")


def test_a_busy_port_fails_before_anything_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    monkeypatch.setenv("NEXUS_EMBEDDER", "foo")  # would fail later; the port is checked first
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = str(holder.getsockname()[1])
        result = CliRunner().invoke(cli, ["serve", "--data-dir", str(tmp_path), "--port", port])
    assert result.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.output
    assert "NEXUS_EMBEDDER" not in result.output
    for host, said in (("no-such-host.invalid", "give an address"), ("192.0.2.1", "no address")):
        args = ["serve", "--data-dir", str(tmp_path), "--host", host, "--port", port]
        wrong = CliRunner().invoke(cli, args)
        assert wrong.exit_code == 2
        assert said in wrong.output, wrong.output  # not "another program holds it"


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

        sid = httpx.post(f"{url}/sessions", timeout=HTTP_TIMEOUT).json()["id"]
        httpx.post(
            f"{url}/sessions/{sid}/episodes",
            json={"speaker": "user", "content": "I adopted a puppy called Biscuit"},
            timeout=HTTP_TIMEOUT,
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
        runner.invoke(cli, ["settings", "set", "fusion=learned", "--url", url])
        learned = runner.invoke(
            cli, ["context", "--session", str(sid), "--explain", "Biscuit?", "--url", url]
        )
        assert learned.exit_code == 0, learned.output
        assert "placed by" in learned.output
        assert "ranker" in learned.output
        assert "%" in learned.output  # the score as a chance
        runner.invoke(cli, ["settings", "set", "fusion=rrf", "--url", url])
        result = runner.invoke(cli, ["entities", "--session", str(sid), "--url", url])
        assert result.exit_code == 0, result.output
        assert "entities seen by session" in result.output
        result = runner.invoke(
            cli, ["chat", "--session", str(sid), "--url", url], input="dog name?\n\n"
        )
        assert result.exit_code == 0, result.output
        assert "Your dog is called Biscuit." in result.output


def test_context_takes_a_budget_a_filter_and_a_time_and_marks_excerpts(
    config: Config, embedder: SwitchableEmbedder
) -> None:
    from nexusai.app import create_app
    from tests.live_server import live_server

    long = (
        "The weather was fine all week. " * 40
        + "My cat Miso is allergic to salmon. "
        + ("We walked a lot and ate well. " * 40)
    )
    runner = CliRunner()
    with live_server(create_app(config, embedder)) as url:
        sid = httpx.post(f"{url}/sessions", timeout=HTTP_TIMEOUT).json()["id"]
        said = [
            {"speaker": "assistant", "content": long, "occurredAt": "2026-01-05T10:00:00Z"},
            {"speaker": "user", "content": "Miso likes tuna", "occurredAt": "2026-03-05T10:00:00Z"},
        ]
        httpx.post(f"{url}/sessions/{sid}/episodes", json={"episodes": said}, timeout=HTTP_TIMEOUT)
        httpx.patch(
            f"{url}/settings", json={"fusion": "learned", "recentLimit": 0}, timeout=HTTP_TIMEOUT
        )
        asked = ["context", "--session", str(sid), "--url", url, "What is Miso allergic to?"]
        budgeted = runner.invoke(cli, [*asked, "--budget", "200"])
        assert budgeted.exit_code == 0, budgeted.output
        flat = re.sub(r"[\s│]+", "", budgeted.output)  # the table folds long text
        assert "[excerpt:characters" in flat
        assert "…" in flat
        assert re.search(r"\n\d+ of 200 tokens used\n", budgeted.output)
        prompt = runner.invoke(cli, [*asked, "--budget", "200", "--prompt"])
        served = httpx.post(
            f"{url}/context",
            json={"sessionId": sid, "message": asked[-1], "settings": {"contextBudget": 200}},
            timeout=HTTP_TIMEOUT,
        ).json()
        assert prompt.output == served["prompt"] + "\n"  # the block, as the LLM gets it
        assert "5 March 2026\nuser: Miso likes tuna" in prompt.output
        filtered = runner.invoke(cli, [*asked, "--after", "2026-03-01", "--speaker", "user"])
        assert "Miso likes tuna" in filtered.output
        assert "weather" not in filtered.output
        timed = runner.invoke(cli, [*asked, "--now", "2026"])
        assert timed.exit_code == 2
        assert "--now" in timed.output
        assert "Traceback" not in timed.output
        bad = runner.invoke(cli, [*asked, "--after", "1"])
        assert bad.exit_code == 2
        assert "--after" in bad.output


def test_cli_without_a_service_says_how_to_start_one() -> None:
    result = CliRunner().invoke(cli, ["settings", "get", "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 1
    assert "nexus serve" in result.output


def test_eval_locomo_smoke_on_one_conversation(tmp_path: Path, dev_data: Path) -> None:
    """The real evaluation path on one real conversation: imports, asks, writes JSON."""
    import json

    data = dev_data / "locomo" / "locomo10.json"
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
    [locomo] = report["datasets"]
    assert locomo["conversations"] == ["locomo:conv-26"]
    assert locomo["questions"] > 150
    assert {r["dataset"] for r in report["results"]} == {"locomo"}
    pairs = {(r["semanticWeight"], r["keywordWeight"]): r for r in report["results"]}
    assert report["configured"] == {"fusion": "rrf", "semanticWeight": 0.5, "keywordWeight": 2.0}
    # No learned row (one conversation cannot be cross-validated): the pair is recommended.
    assert "cross-validation needs two conversations" in result.output
    assert report["recommended"] == {"fusion": "rrf", "semanticWeight": 1, "keywordWeight": 1}
    assert "1*" in result.output  # the row recommended carries the star
    assert {(1.0, 0.0), (0.0, 1.0), (0.5, 2.0), (1.0, 1.0)} <= set(pairs)
    assert locomo["semanticLimit"] == "k"
    assert "0.5+" in result.output
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


def test_eval_beam_smoke_on_one_chat(tmp_path: Path, dev_data: Path) -> None:
    """BEAM's format through the real path: one chat, its questions by type."""
    import json

    data = dev_data / "beam"
    out = tmp_path / "beam.json"
    args = ["eval", "beam", "--data", str(data), "--chats", "1", "--k", "10", "--json", str(out)]
    result = CliRunner(env={"NEXUS_DATA_DIR": str(tmp_path / "d")}).invoke(cli, args)
    assert result.exit_code == 0, result.output
    [beam] = json.loads(out.read_text())["datasets"]
    assert beam["dataset"] == "beam"
    assert beam["questions"] == 18  # 20 probes, the two abstention ones have no evidence
    assert beam["droppedEvidenceRefs"] == 0
    semantic = next(r for r in beam["results"] if r["keywordWeight"] == 0.0)
    assert "information_extraction" in semantic["byCategory"]
    assert semantic["recall"]["10"] > 0.2  # far below what it measures; a broken path fails
    keyword = next(r for r in beam["results"] if r["semanticWeight"] == 0.0)
    legs = (semantic["recall"]["10"], keyword["recall"]["10"])
    assert max(legs) <= beam["legChoiceBound"]["10"] <= min(1.0, sum(legs))
    assert "better single leg" in result.output


def test_beam_tiers_are_sets_named_by_their_folders(tmp_path: Path, dev_data: Path) -> None:
    """`--beam` given twice: each tier a set of its own name (folds are a set's name and a
    conversation's, so two tiers' chat 1 never share one); two of one name are refused."""
    from nexusai.cli.eval import load_sets
    from nexusai.errors import InvalidInput

    for tier in ("beam", "beam500k"):
        (tmp_path / tier).mkdir()
        (tmp_path / tier / "1").symlink_to(dev_data / "beam" / "1")
    sets = load_sets(None, (tmp_path / "beam", tmp_path / "beam500k"), ())
    assert [s.name for s in sets] == ["beam", "beam500k"]
    again = tmp_path / "other" / "beam"
    again.mkdir(parents=True)
    with pytest.raises(InvalidInput, match="two datasets are named beam"):
        load_sets(None, (tmp_path / "beam", again), ())


def test_eval_jsonl_and_the_worst_case_across_sets(tmp_path: Path) -> None:
    """The documented JSONL format, evaluated twice as two sets: the worst case is there."""
    import json

    lines = [
        {"conversation": "c", "session": "s1", "id": i, "speaker": "user", "content": text}
        for i, text in enumerate(
            [
                "I adopted a puppy called Biscuit",
                "The quarterly report is due on Friday",
                "My sister moved to Lisbon last spring",
                "I am learning to play the cello",
            ]
        )
    ]
    lines += [
        {
            "conversation": "c",
            "question": "What is my dog called?",
            "evidence": [0],
            "answer": "Biscuit",
        },
        {
            "conversation": "c",
            "question": "Where does my sister live?",
            "evidence": [2],
            "answer": "In Lisbon",
        },
        {
            "conversation": "c",
            "question": "What breed is my dog?",
            "evidence": [0],
            "answer": "A beagle",
        },  # the evidence does not state it: no answer recall
    ]
    first, second = tmp_path / "mine.jsonl", tmp_path / "again.jsonl"
    first.write_text("\n".join(json.dumps(line) for line in lines))
    second.write_text(first.read_text())
    out = tmp_path / "all.json"
    args = ["eval", "all", "--jsonl", str(first), "--jsonl", str(second), "--json", str(out)]
    result = CliRunner(env={"NEXUS_DATA_DIR": str(tmp_path / "d")}).invoke(cli, args)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert [d["dataset"] for d in report["datasets"]] == ["mine", "again"]
    semantic = next(w for w in report["worst"] if w["keywordWeight"] == 0.0)
    assert semantic["recall"]["5"] == 1.0
    assert "Worst case across mine, again" in result.output
    learned = [r for r in report["results"] if r["fusion"] == "learned"]
    assert [r["dataset"] for r in learned] == ["mine", "again"]  # each scored by the other
    assert learned[0]["recall"]["5"] == 1.0  # 4 candidates: any order finds both at 5
    budgeted = learned[0]["withinBudget"]["dense"]  # split by the source that found it
    assert budgeted["ceiling"] == {"overall": 1.0, "byCategory": {"all": 1.0}}
    found = budgeted["foundBy"]["overall"]["1000"]
    assert sum(found.values()) == pytest.approx(budgeted["recall"]["1000"]) == 1.0
    assert "ceiling" in result.output
    assert (budgeted["answered"], budgeted["answerRecall"]["1000"]) == (2, 1.0)
    assert budgeted["answerByCategory"]["all"]["500"] == 1.0
    assert "evidence / answer" in result.output
    assert report["recommended"] == {"fusion": "learned", "semanticWeight": 1, "keywordWeight": 1}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"conversation": "c", "question": "q"}')
    failed = CliRunner().invoke(cli, ["eval", "jsonl", str(bad)])
    assert failed.exit_code == 1
    assert "line 1: not a message or a question" in failed.output
    for ks, said in (("abc", "'abc' is not"), ("", "at least one"), ("0", "'0' is not")):
        refused = CliRunner().invoke(cli, ["eval", "jsonl", str(first), "--k", ks])
        assert refused.exit_code == 2, refused.output
        assert said in refused.output


def test_configured_settings_are_the_defaults_without_a_store(tmp_path: Path) -> None:
    from nexusai.evaluation.report import configured_settings

    config = Config.from_env({}, data_dir=tmp_path / "nothing-here")
    expected = {"fusion": "rrf", "semanticWeight": 1.0, "keywordWeight": 0.0}
    assert configured_settings(config) == expected
    assert not (tmp_path / "nothing-here").exists()  # looking created nothing


def test_eval_depth_below_the_largest_k_is_a_clean_error(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    data.write_text("[]")
    result = CliRunner().invoke(cli, ["eval", "locomo", "--data", str(data), "--depth", "10"])
    assert result.exit_code == 1
    assert "--depth 10 is less than the largest k (20)" in result.output
    assert "Traceback" not in result.output


def test_projects_sessions_and_add_from_the_cli_with_a_key(
    tmp_path: Path, embedder: SwitchableEmbedder
) -> None:
    """A new user's first session without curl: project, session, a message, then context."""
    import json

    from nexusai.app import create_app
    from tests.live_server import live_server

    config = Config.from_env({}, data_dir=tmp_path / "d", extractor="none", api_key="k-1")
    runner = CliRunner()
    with live_server(create_app(config, embedder)) as url:
        base = ["--url", url, "--api-key", "k-1"]
        assert "401" in runner.invoke(cli, ["projects", "list", "--url", url]).output
        created = runner.invoke(cli, ["projects", "create", "home", "--json", *base])
        assert created.exit_code == 0, created.output
        project = json.loads(created.output)["id"]
        made = runner.invoke(cli, ["sessions", "create", "--project", str(project), *base])
        assert made.output.startswith("session ")
        named = runner.invoke(cli, ["sessions", "create", "--project", "home", "--json", *base])
        assert json.loads(named.output)["projectId"] == project  # by name, as elsewhere
        sid = made.output.split()[1]
        added = runner.invoke(cli, ["add", "--session", sid, "My dog is Biscuit", "--json", *base])
        assert json.loads(added.output)["content"] == "My dog is Biscuit"
        listed = runner.invoke(cli, ["sessions", "list", "--project", str(project), *base])
        assert listed.output.startswith(f"{sid}\thome\t")  # the project's name, not its id
        by_name = runner.invoke(cli, ["sessions", "list", "--project", "home", *base])
        assert by_name.output == listed.output
        port = url.rsplit(":", 1)[1]  # no --url: NEXUS_PORT says where, as for `nexus serve`
        env = {"NEXUS_PORT": port, "NEXUS_API_KEY": "k-1", "NEXUS_URL": ""}
        assert runner.invoke(cli, ["sessions", "list", "--project", "home"], env=env).output == (
            listed.output
        )
        piped = runner.invoke(
            cli, ["add", "--session", sid, "-", "--json", *base], input="from a pipe\n"
        )
        assert json.loads(piped.output)["content"] == "from a pipe"
        nobody = runner.invoke(cli, ["add", "--session", sid, "hi", "--speaker", "", *base])
        assert nobody.exit_code == 2
        assert "--speaker" in nobody.output
        assert "episodes[0]" not in nobody.output
        env = {"NEXUS_API_KEY": "k-1"}  # the documented variable works as well as the flag
        shown = runner.invoke(cli, ["context", "--session", sid, "dog?", "--url", url], env=env)
        assert "2 recent turns" in shown.output  # the two messages just added
        dog = json.loads(added.output)["id"]
        pinned = runner.invoke(cli, ["pin", str(dog), *base])
        assert pinned.output == f"episode {dog} pinned\n"
        headers = {"Authorization": "Bearer k-1"}
        assert (
            httpx.get(f"{url}/episodes/{dog}", headers=headers, timeout=HTTP_TIMEOUT).json()[
                "pinned"
            ]
            is True
        )
        assert runner.invoke(cli, ["pin", str(dog), "--off", *base]).output.endswith("unpinned\n")
        assert "does not exist" in runner.invoke(cli, ["pin", "999", *base]).output
        missing = runner.invoke(cli, ["chat", "--session", "999", *base], input="hello\n")
        assert missing.exit_code == 1
        assert "session 999 does not exist" in missing.output
        assert "assistant>" not in missing.output
        kept = runner.invoke(cli, ["projects", "retention", "home", "30", *base])  # by name
        said = "its episodes are kept 30 days after they were said\n"
        assert kept.output == f"project 'home' (id {project}): {said}"
        by_id = runner.invoke(cli, ["projects", "retention", str(project), "30", *base])
        assert by_id.output == kept.output
        unknown = runner.invoke(cli, ["projects", "retention", "nowhere", "30", *base])
        assert "there is no project named 'nowhere'" in unknown.output
        assert (
            runner.invoke(cli, ["projects", "list", *base]).output
            == f"{project}\thome\tkept 30 days\n"
        )
        assert (
            "Invalid value"
            in runner.invoke(cli, ["projects", "retention", str(project), "0", *base]).output
        )
        runner.invoke(cli, ["projects", "retention", str(project), *base])
        assert runner.invoke(cli, ["projects", "list", *base]).output == f"{project}\thome\n"
        bad = runner.invoke(cli, ["settings", "set", "keywordWeight", *base])
        assert "write NAME=VALUE, e.g. keywordWeight=1" in bad.output
    gone = runner.invoke(cli, ["projects", "list", "--url", url])
    assert "no nexusai service answers at" in gone.output


def test_eval_all_without_data_says_what_to_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where ../shared/data is not
    result = CliRunner(env={"NEXUS_DATA_DIR": str(tmp_path / "d")}).invoke(cli, ["eval", "all"])
    assert result.exit_code == 1
    assert "--locomo FILE" in result.output
    assert "Traceback" not in result.output
    result = CliRunner().invoke(cli, ["eval", "all", "--jsonl", str(tmp_path / "none.jsonl")])
    assert result.exit_code == 2
    assert "does not exist" in result.output


def test_eval_plot_at_any_cut_offs(tmp_path: Path) -> None:
    import json

    turns = ["I adopted a puppy called Biscuit", "The report is due on Friday"]
    lines = [
        {"conversation": "c", "session": "s", "id": i, "speaker": "user", "content": t}
        for i, t in enumerate(turns)
    ]
    lines.append({"conversation": "c", "question": "What is my dog called?", "evidence": [0]})
    data = tmp_path / "mine.jsonl"
    data.write_text("\n".join(json.dumps(line) for line in lines))
    plot = tmp_path / "p.png"
    args = ["eval", "jsonl", str(data), "--k", "1,3", "--plot", str(plot)]
    result = CliRunner(env={"NEXUS_DATA_DIR": str(tmp_path / "d")}).invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_a_data_dir_that_is_a_file_or_an_unwritable_out_is_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    data = tmp_path / "chat.jsonl"
    data.write_text('{"session": "s", "speaker": "user", "content": "hi"}\n')
    for args in (
        ["import", "--data-dir", str(a_file), str(data)],
        ["serve", "--data-dir", str(a_file), "--port", str(free_port())],
        ["export", "--project", "p", "--out", str(tmp_path / "missing" / "x.jsonl")],
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, (args, result.output)
        assert result.output.strip().splitlines()[-1].startswith("Error: "), result.output
        assert "Traceback" not in result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)


def test_import_goes_through_a_running_service_with_url(
    config: Config, embedder: SwitchableEmbedder, tmp_path: Path
) -> None:
    from nexusai.app import create_app
    from tests.live_server import live_server

    data = tmp_path / "chat.jsonl"
    data.write_text('{"session": "s", "speaker": "user", "content": "I live in Lisbon"}\n')
    with live_server(create_app(config, embedder)) as url:
        held = CliRunner().invoke(cli, ["import", "--data-dir", str(config.data_dir), str(data)])
        assert held.exit_code == 1
        assert "nexus import --url" in held.output  # what to do instead
        sent = CliRunner().invoke(cli, ["import", "--url", url, str(data), "--project", "p"])
        assert sent.exit_code == 0, sent.output
        assert "1 episodes" in sent.output
        found = httpx.get(
            f"{url}/episodes/search", params={"q": "Lisbon"}, timeout=HTTP_TIMEOUT
        ).json()
        assert [e["content"] for e in found] == ["I live in Lisbon"]
        out = tmp_path / "p.jsonl"
        exported = CliRunner().invoke(
            cli, ["export", "--project", "p", "--url", url, "--out", str(out)]
        )
        assert exported.exit_code == 0, exported.output
        assert "1 episodes of project 'p' exported from" in exported.output
        again = CliRunner().invoke(
            cli, ["export", "--project", "p", "--data-dir", str(config.data_dir)]
        )
        assert out.read_text() == again.stdout  # the same lines as a local export gives


def test_doctor_and_reindex_refuse_a_data_dir_with_no_store(tmp_path: Path) -> None:
    typo = tmp_path / "nexus-dat"
    for command in (["doctor"], ["reindex"]):
        result = CliRunner().invoke(cli, [*command, "--data-dir", str(typo)])
        assert result.exit_code == 1
        assert "there is no nexusai store in" in result.output
    assert not typo.exists()


def test_import_tells_the_format_and_keys_list_says_when_there_are_none(tmp_path: Path) -> None:
    import json

    env = {"NEXUS_DATA_DIR": str(tmp_path / "d"), "NEXUS_EXTRACTOR": "none"}
    data = tmp_path / "chat.jsonl"
    data.write_text(json.dumps({"session": "s", "speaker": "user", "content": "hello"}) + "\n")
    imported = CliRunner(env=env).invoke(cli, ["import", str(data)])
    assert imported.exit_code == 0, imported.output
    assert "1 episodes" in imported.output
    assert "searchable after" in imported.output
    listed = CliRunner(env=env).invoke(cli, ["keys", "list"])
    assert listed.exit_code == 0
    assert "no keys" in listed.output


def _import_names(tmp_path: Path, *options: str) -> tuple[str, int, set[str]]:
    """`nexus import` of 60 messages naming people and places, with spaCy: what it said,
    how many episodes still wait for extraction, and the entities stored."""
    import json

    from nexusai.memory.sqlite.store import SqliteStore

    env = {"NEXUS_DATA_DIR": str(tmp_path / "d"), "NEXUS_EXTRACTOR": "spacy"}
    data = tmp_path / "chat.jsonl"
    said = ["Maria Lopez moved to Lisbon", "Ana visited Porto with Maria Lopez"] * 30
    data.write_text(
        "".join(json.dumps({"session": "s", "speaker": "u", "content": t}) + "\n" for t in said)
    )
    imported = CliRunner(env=env).invoke(cli, ["import", str(data), *options])
    assert imported.exit_code == 0, imported.output
    with SqliteStore(tmp_path / "d" / "nexus.db") as store:
        pending = store.derived.count_pending_extraction()
        names = {row[0] for row in store.connection().execute("SELECT name FROM entities")}
    return imported.output, pending, names


@pytest.mark.model
def test_an_import_that_waits_for_its_entities(tmp_path: Path) -> None:
    output, pending, names = _import_names(tmp_path, "--entities", "wait")
    assert "wait for entity extraction" not in output
    assert pending == 0
    assert {"Maria Lopez", "Lisbon"} <= names


@pytest.mark.model
def test_an_import_leaves_its_entities_to_the_service(tmp_path: Path) -> None:
    output, pending, names = _import_names(tmp_path)
    assert "60 episodes wait for entity extraction" in output
    assert pending == 60
    assert names == set()


@pytest.mark.parametrize("group", ["projects", "sessions", "keys", "settings", "eval"])
def test_every_command_says_what_it_does(group: str) -> None:
    from nexusai.cli import cli as root

    commands = root.commands[group].commands  # type: ignore[attr-defined]
    for name, command in commands.items():
        assert command.help, f"nexus {group} {name} has no help"
        for option in command.params:
            if isinstance(option, click.Option) and option.name not in ("url", "api_key"):
                assert option.help, f"nexus {group} {name} {option.opts[0]} has no help"


def test_chat_exits_1_when_the_llm_fails(config: Config, embedder: SwitchableEmbedder) -> None:
    from nexusai.app import create_app
    from tests.live_server import live_server
    from tests.openai_stub import openai_stub

    with (
        openai_stub() as (llm_url, state),
        live_server(create_app(config, embedder, OpenAIChat(llm_url, "m"))) as url,
    ):
        import httpx

        sid = httpx.post(f"{url}/sessions", timeout=HTTP_TIMEOUT).json()["id"]
        state.mode = "error"
        result = CliRunner().invoke(
            cli, ["chat", "--session", str(sid), "--url", url], input="hello\n\n"
        )
    assert result.exit_code == 1
    assert "1 turns failed" in result.output


def test_a_missing_extra_is_refused_before_any_work() -> None:
    with pytest.raises(click.UsageError, match=r"--plot needs no_such_module_here: pip install"):
        require_extra("no_such_module_here", "plot", "--plot")


def _small_store(data_dir: Path) -> None:
    from nexusai.memory.sqlite.store import SqliteStore

    with SqliteStore(Config.from_env({}, data_dir=data_dir).db_path) as store:
        project = store.projects.create("p")
        session = store.sessions.create(project.id, "s")
        store.episodes.add(session.id, [NewEpisode("user", "I live in Lisbon")])


def test_export_writes_a_device_or_a_fifo_in_place_and_files_for_their_owner(
    tmp_path: Path,
) -> None:
    """A rename would put a plain file where /dev/null was (as root, for every user)."""
    import os
    import stat
    import threading

    data = tmp_path / "d"
    _small_store(data)
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE(Config.from_env({}, data_dir=data).db_path.stat().st_mode) == 0o600
    export = ["export", "--project", "p", "--data-dir", str(data), "--out"]
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    read: list[bytes] = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_bytes()))
    reader.start()
    result = CliRunner().invoke(cli, [*export, str(fifo)])
    reader.join(timeout=30)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert b"I live in Lisbon" in read[0]
    if os.geteuid() == 0:  # a device node, as /dev/null is, can be made by root alone
        device = tmp_path / "null"
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        assert CliRunner().invoke(cli, [*export, str(device)]).exit_code == 0
        assert stat.S_ISCHR(device.stat().st_mode)
    plain = tmp_path / "p.jsonl"
    assert CliRunner().invoke(cli, [*export, str(plain)]).exit_code == 0
    assert stat.S_IMODE(plain.stat().st_mode) == 0o600
    assert "I live in Lisbon" in plain.read_text()
    assert not (tmp_path / "p.jsonl.part").exists()
    backup = tmp_path / "b.db"
    result = CliRunner().invoke(cli, ["backup", "--data-dir", str(data), str(backup)])
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
