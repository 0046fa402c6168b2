"""The memory inspector (/ui) in a real headless Chromium, against `nexus serve` as its own
process with the real model, plus the API it stands on (`legs`, per-turn settings,
episode detail, /eval-results)."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from nexusai.client import Client
from nexusai.models import Episode
from nexusai.schemas import EpisodeOut
from tests.conftest import HTTP_TIMEOUT
from tests.fused import fuse_ranked
from tests.live_server import server_process

KEY = "inspector-test-key"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
QUESTION = "What did the vet say about Biscuit's allergy?"

# An invented household's memory: the legs disagree on it (Biscuit and the vet are named in
# some turns, only described in others), so the weights move the fused order.
SESSIONS = {
    "spring": [
        ("user", "We adopted a beagle puppy and named him Biscuit."),
        ("assistant", "Biscuit is a lovely name for a beagle! How old is he?"),
        ("user", "He is ten weeks old and chews every shoe in the hallway."),
        ("user", "My sister Hanna lives in Hamburg and visits in May."),
        ("assistant", "A visit in May sounds lovely; Hamburg is beautiful in spring."),
        ("user", "I started learning the cello; my teacher is called Mr. Okafor."),
        ("user", "The dog keeps scratching his ears after walks in the park."),
        ("assistant", "Frequent ear scratching can mean an infection or an allergy."),
        ("user", "Biscuit barked at the mailman all morning."),
        ("user", "The vet clinic on Elm Street opens at eight on Saturdays."),
    ],
    "summer": [
        ("user", "The vet said Biscuit is allergic to chicken, so no more chicken treats."),
        ("assistant", "Good to know. Salmon or lamb treats are common alternatives."),
        ("user", "We switched his food to a grain-free lamb formula."),
        ("user", "Hanna brought a cake from her bakery in Hamburg."),
        ("user", "My cello recital is on the 14th of July at the community hall."),
        ("assistant", "Good luck at the recital! Which piece are you playing?"),
        ("user", "A Bach suite, the first one, in G major."),
        ("user", "The veterinarian also wants a follow-up check in September."),
    ],
    "autumn": [
        ("user", "Our puppy's itching is much better since the new diet."),
        ("user", "I bought a raincoat for the dog because he hates getting wet."),
        ("assistant", "A raincoat makes autumn walks easier for both of you."),
        ("user", "The September check went well: the skin rash is gone."),
        ("user", "I am planning a trip to Lisbon in October with my partner."),
        ("assistant", "Lisbon in October is warm and less crowded."),
        ("user", "Biscuit will stay with Hanna while we are in Lisbon."),
        ("user", "Mr. Okafor says my bowing has improved a lot."),
    ],
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data_dir = tmp_path_factory.mktemp("inspector")
    serving = server_process(data_dir, NEXUS_API_KEY=KEY, NEXUS_EXTRACTOR="spacy")
    with serving as url, Client(url, KEY) as client:
        project = client.create_project("household")
        ids = {}
        for title, turns in SESSIONS.items():
            session = client.create_session(project.id, title)
            ids[title] = session.id
            client.add_episodes(session.id, [{"speaker": s, "content": c} for s, c in turns])
        _wait_indexed(url)
        yield {"url": url, "data_dir": data_dir, "sessions": ids, "client": client}


def _wait_indexed(url: str) -> None:
    for _ in range(600):  # /ready answers 503 while the start reads ahead, then 200
        ready = httpx.get(f"{url}/ready", timeout=HTTP_TIMEOUT)
        if ready.status_code == 200 and ready.json()["pendingVectors"] == 0:
            return
        time.sleep(0.1)
    raise AssertionError("the vectors were not written")


# -- the API the page stands on ----------------------------------------------------------


def test_legs_refuse_at_any_weights_to_the_servers_order(served: dict[str, Any]) -> None:
    client: Client = served["client"]
    session = served["sessions"]["autumn"]
    only_semantic = {"semanticWeight": 1.0, "keywordWeight": 0.0, "semanticLimit": 10}
    asked = client.context(session, QUESTION, legs=True, settings=only_semantic)
    assert asked.legs is not None
    assert asked.legs.keyword, "both legs are asked even at keywordWeight 0"
    assert asked.legs.terms == ["vet", "say", "biscuit", "allergy"]
    assert asked.legs.rrf_k == 60
    rows = {e.id: e.to_episode() for e in asked.legs.episodes}
    semantic = [rows[i] for i in asked.legs.semantic]
    keyword = [rows[i] for i in asked.legs.keyword]
    for weights in [(1.0, 0.0), (1.0, 1.0), (0.25, 5.0), (0.0, 2.0)]:
        settings = {"semanticWeight": weights[0], "keywordWeight": weights[1], "semanticLimit": 10}
        server = client.context(session, QUESTION, settings=settings).memories
        fused = fuse_ranked(semantic, keyword, *weights, limit=10)
        assert [m.id for m in server] == [f.episode.id for f in fused], weights


def test_turn_settings_are_checked_and_never_saved(served: dict[str, Any]) -> None:
    url, session = served["url"], served["sessions"]["spring"]
    headers = {"Authorization": f"Bearer {KEY}"}
    before = httpx.get(f"{url}/settings", headers=headers, timeout=HTTP_TIMEOUT).json()
    body = {"sessionId": session, "message": "dog", "settings": {"semanticLimit": 500}}
    refused = httpx.post(f"{url}/context", json=body, headers=headers, timeout=HTTP_TIMEOUT)
    assert refused.status_code == 422
    assert refused.json()["detail"] == "semanticLimit must be from 1 to 100, got 500"
    body["settings"] = {"keywordWeight": 3}
    assert (
        httpx.post(f"{url}/context", json=body, headers=headers, timeout=HTTP_TIMEOUT).status_code
        == 200
    )
    assert httpx.get(f"{url}/settings", headers=headers, timeout=HTTP_TIMEOUT).json() == before


def test_episode_detail_has_vector_state_and_entities(client: TestClient) -> None:
    session = client.post("/sessions", json={}).json()["id"]
    client.post(f"/sessions/{session}/episodes", json={"speaker": "user", "content": "hi"})
    plain = client.get(f"/sessions/{session}/episodes").json()
    detail = client.get(f"/sessions/{session}/episodes?detail=true").json()
    assert "vectorState" not in plain[0]
    assert detail[0]["vectorState"] == "indexed"
    assert detail[0]["entities"] == []
    assert EpisodeOut.model_validate(detail[0]).content == "hi"


def test_eval_results_come_from_the_data_directory(client: TestClient, tmp_path: Path) -> None:
    missing = client.get("/eval-results")
    assert missing.status_code == 404
    assert "nexus eval all --json" in missing.json()["detail"]
    results = {"results": [{"dataset": "x", "semanticWeight": 1, "keywordWeight": 0}]}
    (tmp_path / "data" / "eval-results.json").write_text(json.dumps(results))
    assert client.get("/eval-results").json() == results


def test_the_page_is_open_offline_and_its_data_is_not(served: dict[str, Any]) -> None:
    url = served["url"]
    page = httpx.get(f"{url}/ui/", timeout=HTTP_TIMEOUT)
    assert page.status_code == 200
    assert "memory inspector" in page.text
    for asset in re.findall(r'(?:src|href)="([^"]+)"', page.text):
        assert "//" not in asset, f"{asset}: the page must work with no network"
        if not asset.startswith("data:"):
            assert httpx.get(f"{url}/ui/{asset}", timeout=HTTP_TIMEOUT).status_code == 200, asset
    assert httpx.get(f"{url}/eval-results", timeout=HTTP_TIMEOUT).status_code == 401
    assert httpx.get(f"{url}/sessions", timeout=HTTP_TIMEOUT).status_code == 401


# -- in a real browser ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        reason = "no chromium on this machine (apt-get install chromium; .ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser tests: {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


# Headless, as root, on a machine with no outside network: Chromium must not try to reach
# Google's hosts (it would, many connections at a time, at every start).
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def page(browser: Any, served: dict[str, Any]) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.goto(f"{served['url']}/ui/")
    yield opened
    context.close()
    assert errors == [], "the page's script threw"


def _enter_key(page: Any) -> None:
    page.fill("#key", KEY)
    page.click("#key-form button")
    page.wait_for_selector("#sessions li")


def _memory_ids(page: Any, selector: str = "#memories > li") -> list[int]:
    return [int(i) for i in page.eval_on_selector_all(selector, "ns => ns.map(n => n.dataset.id)")]


def test_without_a_key_the_page_says_so(page: Any) -> None:
    page.wait_for_selector("#message:not([hidden])")
    assert "wants an API key" in page.inner_text("#message")
    assert page.is_visible("#episodes-hint")  # and the empty pane says what to do
    page.fill("#key", "not-the-key")
    page.click("#key-form button")
    page.wait_for_selector("#message:has-text('refused this API key')")


def test_browse_a_session(page: Any, served: dict[str, Any]) -> None:
    _enter_key(page)
    session = served["sessions"]["summer"]
    page.click(f"#sessions li[data-id='{session}'] button")
    page.wait_for_selector("#episodes > li")
    items = page.query_selector_all("#episodes > li")
    assert len(items) == len(SESSIONS["summer"])
    assert "allergic to chicken" in items[0].inner_text()
    assert "indexed" in items[0].inner_text()
    hamburg = items[3].query_selector_all(".chips li")
    assert sorted(chip.inner_text() for chip in hamburg) == ["Hamburg", "Hanna"]
    page.fill("#search", "Hamburg")
    page.click("#search-form button")
    page.wait_for_selector("#episodes-title:has-text('keyword matches')")
    found = [i.inner_text() for i in page.query_selector_all("#episodes > li")]
    # Its three turns first; after them, turns that follow one (their context is indexed).
    assert ["Hamburg" in text for text in found[:4]] == [True, True, True, False]
    said = ["matched the turn before" in text for text in found[:4]]
    assert said == [False, False, False, True]  # a match with no word marked says why
    marked = page.eval_on_selector_all("#episodes > li mark", "ns => ns.map(n => n.textContent)")
    assert marked[:3] == ["Hamburg", "Hamburg", "Hamburg"]  # the hits are highlighted


def test_a_session_row_is_clickable_anywhere_and_rows_go_by_date(
    page: Any, served: dict[str, Any]
) -> None:
    _enter_key(page)
    session = served["sessions"]["autumn"]
    page.click(f"#sessions li[data-id='{session}'] small")  # the date, not the title
    page.wait_for_selector("#episodes-title:has-text('Episodes of session')")
    assert page.inner_text("#episodes-title") == f"Episodes of session {session}"
    dates = page.eval_on_selector_all("#sessions li small", "ns => ns.map(n => n.textContent)")
    stamps = [d.split(" · ", 1)[1] for d in dates]
    assert stamps == sorted(stamps)


def test_ask_then_move_the_keyword_slider(page: Any, served: dict[str, Any]) -> None:
    client: Client = served["client"]
    session = served["sessions"]["autumn"]
    client.update_settings(semanticWeight=1.0, keywordWeight=0.0, semanticLimit=5)
    _enter_key(page)
    page.click("[data-view=ask]")
    page.select_option("#ask-session", str(session))
    page.fill("#ask-message", QUESTION)
    page.click("#ask-form button[type=submit]")
    page.wait_for_selector("#memories > li")
    server = client.context(session, QUESTION, explain=True).memories
    assert _memory_ids(page) == [m.id for m in server]
    first = page.query_selector("#memories > li")
    assert f"semantic #{server[0].semantic_rank}" in first.inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "inspector-ask.png"))

    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.fill("#keyword-weight", "2")  # an input event, as a drag gives
    moved = client.context(session, QUESTION, settings={"keywordWeight": 2.0}).memories
    assert _memory_ids(page) == [m.id for m in moved]
    assert _memory_ids(page) != [m.id for m in server], "the keyword leg must move the order"
    assert requests == [], "moving a slider re-fuses in the page, without a request"
    assert _memory_ids(page, "#memories > li.entered") == []  # the same five, reordered
    # The prompt block was made for the weights asked: it says it is stale, and is
    # fresh again once the sliders are back.
    assert page.inner_text("#prompt-note").startswith("stale: the block as asked at 1.00 / 0.00")
    assert "stale" in (page.get_attribute("#prompt", "class") or "")
    page.fill("#keyword-weight", "0")
    assert not page.inner_text("#prompt-note").startswith("stale")
    page.fill("#keyword-weight", "2")

    page.fill("#semantic-weight", "0.25")
    page.fill("#keyword-weight", "5")
    keyword_led = client.context(
        session, QUESTION, settings={"semanticWeight": 0.25, "keywordWeight": 5.0}
    ).memories
    assert _memory_ids(page) == [m.id for m in keyword_led]
    entered = _memory_ids(page, "#memories > li.entered")
    assert entered, "keyword-only matches enter the top"
    assert entered == [m.id for m in keyword_led if m.id not in {s.id for s in server}]
    left = _memory_ids(page, "#left > li")
    assert left == [m.id for m in server if m.id not in set(entered) | {m.id for m in keyword_led}]
    assert requests == [], "moving a slider re-fuses in the page, without a request"
    assert page.query_selector_all("mark"), "matched keywords are highlighted"
    page.screenshot(path=str(ARTIFACTS / "inspector-ask-moved.png"))


def test_with_a_budget_a_slider_asks_the_server_again(page: Any, served: dict[str, Any]) -> None:
    """The packing is the server's with a budget: a move asks it again (the page used to
    say it re-fused while nothing moved)."""
    client: Client = served["client"]
    session = served["sessions"]["autumn"]
    client.update_settings(fusion="rrf", semanticWeight=1.0, keywordWeight=0.0, contextBudget=300)
    try:
        _enter_key(page)
        page.click("[data-view=ask]")
        page.select_option("#ask-session", str(session))
        assert "asks it again" in page.inner_text("#weights-note")
        page.fill("#ask-message", QUESTION)
        page.click("#ask-form button[type=submit]")
        page.wait_for_selector("#memories > li")
        with page.expect_request(lambda request: request.url.endswith("/context")) as asked:
            page.fill("#keyword-weight", "5")
        sent = asked.value.post_data_json
        assert sent["settings"]["keywordWeight"] == 5
        moved = client.context(
            session, QUESTION, settings={"keywordWeight": 5.0, "contextBudget": 300}
        ).memories
        page.wait_for_function(
            "ids => JSON.stringify([...document.querySelectorAll('#memories > li')]"
            ".map(n => Number(n.dataset.id))) === JSON.stringify(ids)",
            arg=[m.id for m in moved],
        )  # times out, failing, if the page never shows the server's answer at 5
    finally:
        client.update_settings(contextBudget=0)


def test_ask_in_learned_mode_shows_what_moved_each_memory(
    page: Any, served: dict[str, Any]
) -> None:
    client: Client = served["client"]
    session = served["sessions"]["autumn"]
    client.update_settings(fusion="rrf", semanticLimit=5)
    _enter_key(page)
    page.click("[data-view=ask]")
    page.select_option("#ask-session", str(session))
    page.select_option("#fusion", "learned")
    assert page.is_disabled("#keyword-weight")
    assert "weights apply only at fusion rrf" in page.inner_text("#weights-note")
    page.fill("#ask-message", QUESTION)
    page.click("#ask-form button[type=submit]")
    page.wait_for_selector("#memories > li")
    learned = client.context(session, QUESTION, explain=True, settings={"fusion": "learned"})
    assert _memory_ids(page) == [m.id for m in learned.memories]
    first = page.inner_text("#memories > li")
    assert all(f.feature in first for f in learned.memories[0].features or [])
    assert [m.placed_by for m in learned.memories[:3]] == ["ranker", "ranker", "rrf"]
    assert "RRF's place" in page.query_selector_all("#memories > li")[2].inner_text()
    assert "RRF's place" not in first
    assert "fusion learned" in page.inner_text("#fusion-note")
    page.screenshot(path=str(ARTIFACTS / "inspector-ask-learned.png"))
    page.select_option("#fusion", "rrf")  # the sliders work again, and the page asks anew
    assert not page.is_disabled("#keyword-weight")
    page.wait_for_function("document.querySelector('#fusion-note').textContent.includes('rrf')")
    assert client.get_settings()["fusion"] == "rrf"  # asking never saves


def test_the_pages_fusion_is_the_servers(page: Any) -> None:
    """The page's weighted RRF against the service's, on random lists full of ties (ids in
    both legs, in one, repeated) at weights on the sliders' 0.05 grid."""
    rng = random.Random(7)
    page.wait_for_function("typeof window.fuseLegs === 'function'")
    for _ in range(200):
        semantic = rng.sample(range(1, 40), rng.randint(0, 20))
        keyword = [rng.randint(1, 40) for _ in range(rng.randint(0, 40))]
        weights = (rng.randint(0, 100) * 0.05, rng.randint(0, 100) * 0.05)
        limit = rng.randint(1, 30)
        expected = fuse_ranked(_rows(semantic), _rows(keyword), *weights, limit)
        got = page.evaluate(
            "([s, k, ws, wk, n]) => fuseLegs(s, k, ws, wk, n, 60)",
            [semantic, keyword, *weights, limit],
        )
        assert [(m["id"], m["score"]) for m in got] == [(f.episode.id, f.score) for f in expected]


def _rows(ids: list[int]) -> list[Episode]:
    return [Episode(i, 1, "user", f"turn {i}", "2026-01-01T00:00:00Z", "", {}) for i in ids]


def test_save_weights_then_reload(page: Any, served: dict[str, Any]) -> None:
    _enter_key(page)
    page.click("[data-view=ask]")
    page.fill("#semantic-weight", "0.5")
    page.fill("#keyword-weight", "1.75")
    page.click("#save-weights")
    page.wait_for_selector("#message.ok")
    page.reload()  # the key stays in this tab's session storage
    page.wait_for_function("document.querySelector('#keyword-out').textContent === '1.75'")
    assert page.input_value("#semantic-weight") == "0.5"
    assert served["client"].get_settings()["keywordWeight"] == 1.75


def test_refusals_and_outages_are_messages(page: Any, served: dict[str, Any]) -> None:
    _enter_key(page)
    page.click("[data-view=ask]")
    page.select_option("#ask-session", str(served["sessions"]["spring"]))
    page.fill("#ask-message", "dog")
    page.fill("#limit", "500")
    page.click("#ask-form button[type=submit]")
    page.wait_for_selector("#message.error")
    assert "semanticLimit must be from 1 to 100" in page.inner_text("#message")
    before = served["client"].get_settings()
    page.click("#save-weights")
    page.wait_for_function("document.querySelector('#message').textContent.includes('Refused')")
    assert "semanticLimit must be from 1 to 100" in page.inner_text("#message")
    assert served["client"].get_settings() == before, "a refused save changes nothing"
    page.fill("#limit", "10")
    page.route("**/context", lambda route: route.abort())
    page.click("#ask-form button[type=submit]")
    page.wait_for_function("document.querySelector('#message').textContent.includes('answer')")
    assert "does not answer" in page.inner_text("#message")


def test_a_gone_session_is_a_404_message(page: Any, served: dict[str, Any]) -> None:
    client: Client = served["client"]
    doomed = client.create_session(None, "doomed")
    _enter_key(page)
    client.delete_session(doomed.id)
    page.click(f"#sessions li[data-id='{doomed.id}'] button")
    page.wait_for_selector("#message.error")
    assert f"session {doomed.id} does not exist" in page.inner_text("#message")


def test_eval_plot_marks_the_current_weights(
    page: Any, served: dict[str, Any], tmp_path: Path
) -> None:
    rows = [
        {"dataset": name, "semanticWeight": s, "keywordWeight": k, "recall": {"10": r}}
        for name, base in (("locomo", 0.6), ("beam", 0.4))
        for s, k, r in ((1, 0, base), (1, 1, base + 0.1), (0, 1, base - 0.05))
    ]
    (served["data_dir"] / "eval-results.json").write_text(json.dumps({"results": rows}))
    _enter_key(page)
    page.click("[data-view=eval]")  # the view finds the saved results by itself
    page.wait_for_selector("#eval-plot svg")
    assert len(page.query_selector_all("#eval-plot polyline")) == 2
    assert page.query_selector("#eval-plot line.current") is not None
    ticks = page.eval_on_selector_all("#eval-plot .tick", "ns => ns.map(n => n.textContent)")
    assert "0.5" in ticks  # the weights' axis
    assert {"0.40", "0.50", "0.60"} <= set(ticks)  # and recall's, at round values
    page.screenshot(path=str(ARTIFACTS / "inspector-eval.png"))
    legend = page.eval_on_selector_all("#eval-plot .legend", "ns => ns.map(n => n.textContent)")
    assert legend == ["locomo", "beam"]
    boxes = page.eval_on_selector_all(
        "#eval-plot text",
        "ns => ns.map(n => { const b = n.getBBox(); return [b.x, b.y, b.width, b.height]; })",
    )
    for i, a in enumerate(boxes):  # no two labels overlap
        for b in boxes[i + 1 :]:
            apart = (
                a[0] + a[2] <= b[0]
                or b[0] + b[2] <= a[0]
                or a[1] + a[3] <= b[1]
                or b[1] + b[3] <= a[1]
            )
            assert apart, (a, b)
    assert len(page.query_selector_all("#eval-table tr")) == 1 + len(rows)
    headers = {"Authorization": f"Bearer {KEY}"}
    httpx.patch(
        f"{served['url']}/settings",
        json={"fusion": "learned"},
        headers=headers,
        timeout=HTTP_TIMEOUT,
    )
    try:  # at fusion learned no weights are "current"
        page.reload()
        _enter_key(page)
        page.click("[data-view=eval]")
        page.wait_for_selector("#eval-plot svg")
        assert page.query_selector("#eval-plot line.current") is None
    finally:
        httpx.patch(
            f"{served['url']}/settings",
            json={"fusion": "rrf"},
            headers=headers,
            timeout=HTTP_TIMEOUT,
        )
    opened = tmp_path / "mine.json"
    opened.write_text(json.dumps({"results": rows[:3]}))
    page.set_input_files("#eval-file", str(opened))
    page.wait_for_function("document.querySelectorAll('#eval-table tr').length === 4")
    assert len(page.query_selector_all("#eval-plot polyline")) == 1
    opened.write_text("{not json")
    page.set_input_files("#eval-file", str(opened))
    page.wait_for_selector("#message.error")
    assert "not a results file of nexus eval" in page.inner_text("#message")


def test_usable_on_a_phone(browser: Any, served: dict[str, Any]) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    phone = context.new_page()
    phone.goto(f"{served['url']}/ui/")
    _enter_key(phone)
    phone.click("[data-view=ask]")
    overflow = phone.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    context.close()
    assert overflow <= 0, "nothing wider than the screen"


def test_a_budget_shows_what_each_memory_costs(page: Any, served: dict[str, Any]) -> None:
    client: Client = served["client"]
    session = served["sessions"]["autumn"]
    _enter_key(page)
    page.click("[data-view=ask]")
    page.select_option("#ask-session", str(session))
    page.fill("#ask-message", QUESTION)
    page.fill("#budget", "60")
    page.click("#ask-form button[type=submit]")
    page.wait_for_selector("#memories > li :text('tokens')")
    server = client.context(session, QUESTION, budget=60)
    assert _memory_ids(page) == [m.id for m in server.memories]
    assert f"packed into 60 tokens: {server.tokens} used" in page.inner_text("#fusion-note")
    page.click("#prompt-box summary")  # the same block the chat prompt gives the LLM
    assert page.inner_text("#prompt").strip() == server.prompt.strip()


def test_a_pinned_episode_is_shown_as_standing(page: Any, served: dict[str, Any]) -> None:
    client: Client = served["client"]
    cello = next(e for e in client.search("recital", limit=5) if "14th of July" in e.content)
    client.pin(cello.id)
    try:
        _enter_key(page)
        page.click("[data-view=ask]")
        page.select_option("#ask-session", str(served["sessions"]["autumn"]))
        page.fill("#ask-message", QUESTION)
        page.fill("#budget", "120")
        page.click("#ask-form button[type=submit]")
        page.wait_for_selector("#standing > li")
        assert _memory_ids(page, "#standing > li") == [cello.id]
        assert "pinned" in page.inner_text("#standing")
        assert cello.id not in _memory_ids(page)
        server = client.context(served["sessions"]["autumn"], QUESTION, budget=120)
        assert f"{server.tokens} used" in page.inner_text("#fusion-note")  # standing counted
    finally:
        client.pin(cello.id, False)
