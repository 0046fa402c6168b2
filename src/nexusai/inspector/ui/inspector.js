// The memory inspector: browse what is stored, ask what a turn would get, move the weights.
// Everything here goes through the service's public HTTP API with the key the user gave;
// the key lives in this tab's session storage, never in a URL.
"use strict";

const KEY_SLOT = "nexusai-api-key";
const PAGE_SIZE = 50;
const $ = (id) => document.getElementById(id);

const state = {
  projects: [],
  projectId: "",
  sessionOffset: 0,
  sessionId: null,
  episodeOffset: 0,
  episodeTotal: 0,
  asked: null, // {legs, byId, baseline: ids at the weights asked with, session}
  settings: null,
  evalResults: null,
  sessionTitles: new Map(), // id -> title, of the sessions listed so far
};

// -- talking to the service -------------------------------------------------------------

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function explain(status, body) {
  const detail = body && typeof body.detail === "string" ? body.detail : "";
  const fields = body && Array.isArray(body.errors) ? body.errors : [];
  const listed = fields.map((e) => `${e.field}: ${e.message}`).join("; ");
  if (status === 401) {
    return sessionStorage.getItem(KEY_SLOT)
      ? "The service refused this API key: check it (NEXUS_API_KEY, or a key from nexus keys create) and press Use again."
      : "The service wants an API key: enter it above and press Use.";
  }
  if (status === 403) return `Not allowed with this key: ${detail}`;
  if (status === 404) return `Not found: ${detail || "no such item"}`;
  if (status === 422) return `Refused: ${detail}${listed && !detail.includes(listed) ? ` (${listed})` : ""}`;
  if (status === 507) return `The service's disk is full: ${detail}`;
  return `The service answered ${status}: ${detail || "no detail given"}`;
}

async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  const key = sessionStorage.getItem(KEY_SLOT);
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (error) {
    throw new ApiError(0, "The service does not answer: is nexus serve running?");
  }
  const data = response.status === 204 ? null : await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, explain(response.status, data));
  return { data, total: Number(response.headers.get("X-Total-Count") ?? NaN), headers: response.headers };
}

function showMessage(text, kind = "error") {
  const box = $("message");
  box.textContent = text;
  box.className = kind;
  box.hidden = false;
}

function clearMessage() {
  $("message").hidden = true;
}

// Every action runs through here: a failure becomes a message on the page, never a blank.
function guarded(action) {
  return async (...args) => {
    try {
      await action(...args);
    } catch (error) {
      showMessage(error instanceof ApiError ? error.message : `Something broke: ${error}`);
    }
  };
}

// -- drawing ----------------------------------------------------------------------------

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "className") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

function when(text) {
  return text ? text.replace("T", " ").replace(/(\.\d+)?(Z|\+00:00)$/, "") : "";
}

// A light stemmer for marking words only (which words to highlight); ranking is the server's.
const SUFFIXES = ["ations", "ation", "ings", "ing", "ies", "ied", "ers", "er", "es", "ed", "ly", "s", "d"];

function stem(word) {
  for (const suffix of SUFFIXES) {
    if (word.length - suffix.length >= 3 && word.endsWith(suffix)) {
      return word.slice(0, -suffix.length).replace(/[ey]$/, "");
    }
  }
  return word.replace(/[ey]$/, "");
}

function isTerm(word, terms) {
  const lower = word.toLowerCase();
  return terms.some((term) => term === lower || (stem(term).length >= 3 && stem(term) === stem(lower)));
}

const CJK = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}]/u;

function matchRanges(text, terms) {
  const ranges = [];
  const cjkTerms = terms.filter((term) => CJK.test(term));
  for (const match of text.matchAll(/[\p{L}\p{N}]+/gu)) {
    const word = match[0];
    if (isTerm(word, terms)) {
      ranges.push([match.index, match.index + word.length]);
      continue;
    }
    for (const term of cjkTerms) {
      for (let at = word.indexOf(term); at >= 0; at = word.indexOf(term, at + 1)) {
        ranges.push([match.index + at, match.index + at + term.length]);
      }
    }
  }
  return ranges.sort((a, b) => a[0] - b[0]);
}

function highlighted(text, terms) {
  const node = element("p", { className: "content" });
  let done = 0;
  for (const [start, end] of matchRanges(text, terms || [])) {
    if (start < done) continue;
    node.append(text.slice(done, start), element("mark", {}, text.slice(start, end)));
    done = end;
  }
  node.append(text.slice(done));
  node.addEventListener("click", () => node.classList.toggle("open"));
  return node;
}

function episodeItem(episode, { terms = [], badges = [], extra = null } = {}) {
  const meta = element(
    "div",
    { className: "meta" },
    element("b", {}, episode.speaker),
    ` · ${when(episode.occurredAt)} · ${sessionLabel(episode.sessionId)} · #${episode.id}`,
    ...badges
  );
  return element("li", { "data-id": String(episode.id) }, meta, extra, highlighted(episode.content, terms));
}

function sessionLabel(sessionId) {
  const title = state.sessionTitles.get(sessionId);
  return title ? `“${title}” (session ${sessionId})` : `session ${sessionId}`;
}

function badge(text, className) {
  return element("span", { className: `badge ${className}` }, text);
}

function withTitle(node, title) {
  node.title = title;  // the tooltip that says what a badge means
  return node;
}

// -- Browse -----------------------------------------------------------------------------

async function loadProjects() {
  const { data } = await api("/projects?limit=200");
  state.projects = data;
  const select = $("project");
  select.replaceChildren(
    element("option", { value: "" }, "All sessions"),
    ...data.map((p) => element("option", { value: String(p.id) }, `${p.name} (#${p.id})`))
  );
  select.value = state.projectId;
}

async function loadSessions(reset = true) {
  if (reset) {
    state.sessionOffset = 0;
    $("sessions").replaceChildren();
  }
  const project = state.projectId ? `&projectId=${state.projectId}` : "";
  // In the order the conversations took place, not the order they were stored in.
  const page = `limit=${PAGE_SIZE}&offset=${state.sessionOffset}&order=started${project}`;
  const { data, total } = await api(`/sessions?${page}`);
  state.sessionOffset += data.length;
  $("session-count").textContent = Number.isNaN(total) ? "" : `(${total})`;
  for (const session of data) {
    if (session.title) state.sessionTitles.set(session.id, session.title);
    const label = session.title || `session ${session.id}`;
    const date = session.startedAt ? when(session.startedAt) : "no episodes yet";
    // The whole row is the button: click anywhere on it.
    const item = element("li", { "data-id": String(session.id) },
      element("button", { className: "session-row", onclick: guarded(() => selectSession(session.id)) },
        element("span", { className: "title" }, label),
        element("small", {}, ` #${session.id} · ${date}`)));
    $("sessions").append(item);
  }
  $("more-sessions").hidden = !(state.sessionOffset < total);
  fillSessionPicker();
}

function fillSessionPicker() {
  const picker = $("ask-session");
  const chosen = picker.value || (state.sessionId ? String(state.sessionId) : "");
  const options = [...$("sessions").children].map((item) =>
    element("option", { value: item.dataset.id }, item.querySelector(".title").textContent + ` (#${item.dataset.id})`)
  );
  picker.replaceChildren(...options);
  if (chosen && options.some((o) => o.value === chosen)) picker.value = chosen;
}

async function selectSession(sessionId) {
  state.sessionId = sessionId;
  state.episodeOffset = 0;
  for (const item of $("sessions").children) {
    item.classList.toggle("selected", item.dataset.id === String(sessionId));
  }
  $("ask-session").value = String(sessionId);
  await loadEpisodes();
}

async function loadEpisodes() {
  clearMessage();
  const path = `/sessions/${state.sessionId}/episodes?detail=true&limit=${PAGE_SIZE}&offset=${state.episodeOffset}`;
  const { data, total } = await api(path);
  state.episodeTotal = total;
  $("episodes-title").textContent = `Episodes of session ${state.sessionId}`;
  const last = state.episodeOffset + data.length;
  $("page-info").textContent = total ? `${state.episodeOffset + 1}–${last} of ${total}` : "no episodes yet";
  $("prev-page").disabled = state.episodeOffset === 0;
  $("next-page").disabled = last >= total;
  $("episodes").replaceChildren(
    ...data.map((episode) => {
      const stateBadge = badge(episode.vectorState, episode.vectorState === "indexed" ? "ok" : "warn");
      const chips = episode.entities.length
        ? element("ul", { className: "chips" }, ...episode.entities.map((name) => element("li", {}, name)))
        : null;
      return episodeItem(episode, { badges: [" ", stateBadge], extra: chips });
    })
  );
}

async function searchScope(event) {
  event.preventDefault();
  const query = $("search").value.trim();
  if (!query) return;
  clearMessage();
  let scope = "";
  if (state.sessionId) {
    const { data } = await api(`/sessions/${state.sessionId}/scope`);
    scope = `&sessionIds=${data.sessionIds.join(",")}`;
  }
  const { data, headers } = await api(`/episodes/search?q=${encodeURIComponent(query)}&limit=50&explain=true${scope}`);
  const terms = decodeURIComponent(headers.get("X-Search-Terms") || "").split(",").filter(Boolean);
  const where = state.sessionId ? `the scope of session ${state.sessionId}` : "all sessions";
  $("episodes-title").textContent = `${data.length} keyword matches for “${query}” in ${where}`;
  $("page-info").textContent = "";
  $("prev-page").disabled = $("next-page").disabled = true;
  $("episodes").replaceChildren(...data.map((episode, i) => episodeItem(episode, {
    terms,
    badges: [" ", badge(`keyword #${i + 1}`, "rank"), episode.matchedIn === "turnBefore"
      ? withTitle(badge("matched the turn before", "warn"),
        "its words are in the end of the message before this one, which is indexed with it")
      : null].filter(Boolean),
  })));
}

// -- Ask --------------------------------------------------------------------------------

function weights() {
  return {
    semanticWeight: Number($("semantic-weight").value),
    keywordWeight: Number($("keyword-weight").value),
    semanticLimit: Number($("limit").value),
    contextBudget: Number($("budget").value || 0),
    fusion: $("fusion").value,
  };
}

// At fusion learned the ranker orders the memories and the weights do nothing, so the
// sliders say so and rest until fusion is rrf again. With a budget the packing is the
// server's: a move asks the server again instead of re-fusing here.
function showWeights() {
  const { semanticWeight, keywordWeight, fusion, contextBudget } = weights();
  $("semantic-out").textContent = semanticWeight.toFixed(2);
  $("keyword-out").textContent = keywordWeight.toFixed(2);
  const learned = fusion === "learned";
  $("semantic-weight").disabled = $("keyword-weight").disabled = learned;
  $("weights-note").textContent = learned
    ? "fusion learned: the ranker scores every candidate of both legs; the weights apply only at fusion rrf."
    : contextBudget > 0
      ? "fusion rrf with a budget: the server packs the memories, so a move of the sliders asks it again."
      : "fusion rrf: the sliders re-fuse both legs' lists here as they move.";
}

// Whether the server fused lists beside the two legs (a source added by name).
function otherLists(legs) {
  return Object.keys(legs.lists || {}).some((name) => name !== "semantic" && name !== "keyword");
}

// A slider moved: re-fused here, or, with a budget (the server's packing) or lists beside
// the legs, asked again.
function weightsMoved() {
  const beside = state.asked && otherLists(state.asked.legs);
  if ((weights().contextBudget > 0 || beside) && weights().fusion !== "learned") {
    showWeights();
    return limitChanged();
  }
  renderMemories();
}

async function loadSettings() {
  const { data } = await api("/settings");
  state.settings = data;
  $("semantic-weight").value = data.semanticWeight;
  $("keyword-weight").value = data.keywordWeight;
  $("limit").value = data.semanticLimit;
  $("budget").value = data.contextBudget;
  $("fusion").value = data.fusion;
  showWeights();
}

async function ask(event) {
  if (event) event.preventDefault();
  const sessionId = Number($("ask-session").value);
  const message = $("ask-message").value;
  if (!sessionId) return showMessage("Pick a session first (Browse lists them).");
  clearMessage();
  const asked = weights();
  const { data } = await api("/context", {
    method: "POST",
    body: { sessionId, message, explain: true, legs: true, settings: asked },
  });
  const byId = new Map(data.legs.episodes.map((e) => [e.id, e]));
  state.asked = { legs: data.legs, byId, baseline: data.memories.map((m) => m.id), asked, memories: data.memories };
  const standing = data.standing || [];
  $("standing-title").hidden = standing.length === 0;
  $("standing").replaceChildren(...standing.map(standingItem));
  state.asked.tokens = data.tokens;
  $("prompt").textContent = data.prompt;
  $("prompt-box").hidden = !data.prompt;
  $("recent").replaceChildren(...data.recent.map((e) => episodeItem(e)));
  $("entities").replaceChildren(...data.entities.map((e) => element("li", { title: e.type }, `${e.name} · ${e.type}`)));
  for (const warning of data.warnings) showMessage(warning, "warning");
  renderMemories();
}

// Re-fuses the lists the server gave, at the sliders' weights: no request per move.
function renderMemories() {
  showWeights();
  if (!state.asked) return;
  const { legs, byId, baseline, asked, memories } = state.asked;
  const { semanticWeight, keywordWeight } = weights();
  const learned = asked.fusion === "learned";
  // Packing is the server's, and so is the fusion of a list beyond the two legs (whose
  // weight the page does not hold): the page shows the server's choice.
  const packed = asked.contextBudget > 0 || otherLists(legs);
  const fused = learned || packed
    ? memories
    : fuseLegs(legs.semantic, legs.keyword, semanticWeight, keywordWeight, asked.semanticLimit, legs.rrfK);
  const inTop = new Set(fused.map((m) => m.id));
  const before = new Set(baseline);
  $("memories").replaceChildren(...fused.map((m) => memoryItem(m, byId.get(m.id), legs.terms, !before.has(m.id))));
  const left = baseline.filter((id) => !inTop.has(id));
  $("left-title").hidden = left.length === 0;
  $("left").replaceChildren(...left.map((id) => episodeItem(byId.get(id), { terms: legs.terms, badges: [" ", badge("left", "warn")] })));
  $("memories-note").textContent =
    `${fused.length} of ${legs.semantic.length} semantic + ${legs.keyword.length} keyword candidates` +
    ` · terms: ${legs.terms.join(", ") || "none (keyword leg sits out)"}`;
  // The block is the server's, for the weights asked: once the sliders re-fuse the list
  // here it no longer matches, and says so until the page asks again.
  const moved = !learned && !packed && (semanticWeight !== asked.semanticWeight || keywordWeight !== asked.keywordWeight);
  $("prompt").classList.toggle("stale", moved);
  $("prompt-note").textContent = moved
    ? `stale: the block as asked at ${asked.semanticWeight.toFixed(2)} / ${asked.keywordWeight.toFixed(2)}; Ask again for it at these weights`
    : "the server's choice, grouped by conversation";
  $("fusion-note").textContent = asked.contextBudget > 0
    ? `the server's choice (fusion ${asked.fusion}), packed into ${asked.contextBudget} tokens: ${state.asked.tokens} used`
    : packed
      ? `the server's choice (fusion ${asked.fusion}): it fused ${Object.keys(legs.lists).join(", ")}`
    : learned || (semanticWeight === asked.semanticWeight && keywordWeight === asked.keywordWeight)
      ? `the server's order (fusion ${asked.fusion})`
      : `re-fused here at ${semanticWeight.toFixed(2)} / ${keywordWeight.toFixed(2)}`;
}

// A memory the turn carries whatever it found: pinned, or a rule or preference of the user's.
function standingItem(kept) {
  const why = kept.pinned
    ? withTitle(badge("pinned", "ok"), "pinned: every turn of its scope carries it")
    : withTitle(badge(kept.standing, "rank"), `recognised when stored; similarity to the message ${kept.similarity.toFixed(2)}`);
  return episodeItem(kept, { badges: [" ", why, badge(`${kept.tokens} tokens`, "rank")] });
}

function memoryItem(fused, episode, terms, entered) {
  const rank = (name, value) => badge(`${name} ${value === null ? "–" : `#${value}`}`, "rank");
  // Its rank in each list by name: the spec's two always (– where one missed it), then
  // any other source that found it.
  const ranks = fused.ranks || { semantic: fused.semanticRank, keyword: fused.keywordRank };
  const others = Object.keys(ranks).filter((name) => name !== "semantic" && name !== "keyword");
  const badges = [
    " ",
    rank("semantic", ranks.semantic ?? null),
    rank("keyword", ranks.keyword ?? null),
    ...others.map((name) => rank(name, ranks[name])),
    fused.probability == null
      ? badge(`score ${fused.score.toFixed(5)}`, "score")
      : withTitle(badge(`${Math.round(fused.probability * 100)}% likely`, "score"),
        "the learned ranker's chance that this memory answers the message"),
    fused.placedBy === "rrf" ? withTitle(badge("RRF's place", "rank"),
      "every third place goes to RRF (1, 1)'s best not yet placed") : null,
    ...(fused.features || []).map((f) => withTitle(
      badge(`${f.feature} ${f.effect >= 0 ? "+" : ""}${f.effect.toFixed(2)}`, f.effect >= 0 ? "ok" : "warn"),
      `${f.meaning} (value ${f.value.toFixed(3)}; it moved the score by ${f.effect.toFixed(2)} in log-odds)`)),
    fused.tokens == null ? null : badge(`${fused.tokens} tokens`, "rank"),
    fused.excerpt ? withTitle(badge("excerpt", "warn"),
      `the passage given: characters ${fused.excerpt.start} to ${fused.excerpt.end} of ${fused.excerpt.length}`) : null,
    entered ? badge("entered", "ok") : null,
  ];
  // What the LLM gets: the passage, when packing cut a long episode.
  const shown = fused.excerpt ? { ...episode, content: fused.content } : episode;
  const item = episodeItem(shown, { terms, badges });
  item.classList.toggle("entered", entered);
  return item;
}

async function saveWeights() {
  const { data } = await api("/settings", { method: "PATCH", body: weights() });
  state.settings = data;
  showMessage(
    `Saved: fusion ${data.fusion}, semanticWeight ${data.semanticWeight}, keywordWeight ${data.keywordWeight}, semanticLimit ${data.semanticLimit}.`,
    "ok"
  );
}

let limitTimer = null;

// The limit changes which candidates each leg returns, so it asks again (once typing stops).
function limitChanged() {
  clearTimeout(limitTimer);
  if (state.asked) limitTimer = setTimeout(guarded(ask), 400);
}

// -- Eval -------------------------------------------------------------------------------

async function loadEvalFromServer() {
  const { data } = await api("/eval-results");
  showEval(data);
}

// The first time the view opens, it finds the saved results itself; none saved is a hint
// in the view, not an error.
async function evalOnFirstView() {
  if (state.evalResults || state.evalTried) return;
  state.evalTried = true;
  try {
    await loadEvalFromServer();
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 404) throw error;
    $("eval-plot").replaceChildren(element("p", { className: "note" },
      "No results saved yet: run nexus eval … --json <data dir>/eval-results.json, or open a results file."));
  }
}

function loadEvalFile() {
  const file = $("eval-file").files[0];
  if (!file) return;
  $("eval-file").value = ""; // so that opening the same file again, edited, reads it again
  file.text().then(
    (text) => {
      try {
        showEval(JSON.parse(text));
      } catch (error) {
        showMessage(`${file.name} is not a results file of nexus eval: ${error.message}`);
      }
    },
    (error) => showMessage(`Could not read ${file.name}: ${error}`)
  );
}

function showEval(results) {
  const rows = results && Array.isArray(results.results) ? results.results : null;
  if (!rows || !rows.length || !rows[0].recall) {
    throw new Error("this JSON has no results rows with recall (expected nexus eval --json output)");
  }
  clearMessage();
  state.evalResults = rows;
  const ks = Object.keys(rows[0].recall);
  const select = $("eval-k");
  const chosen = select.value;
  select.replaceChildren(...ks.map((k) => element("option", { value: k }, k)));
  select.value = ks.includes(chosen) ? chosen : ks.includes("10") ? "10" : ks[0];
  drawEval();
}

function keywordShare(row) {
  const total = row.semanticWeight + row.keywordWeight;
  return total ? row.keywordWeight / total : 0;
}

function drawEval() {
  const rows = state.evalResults;
  if (!rows) return;
  const k = $("eval-k").value;
  // At fusion learned the weights order nothing: no line claims they are in use.
  const current = state.settings && state.settings.fusion !== "learned" ? keywordShare(state.settings) : null;
  $("eval-plot").replaceChildren(evalPlot(rows, k, current));
  const header = element("tr", {}, ...["dataset", "semantic", "keyword", `R@${k}`].map((h) => element("th", {}, h)));
  const body = rows.map((r) => {
    const isCurrent = state.settings && r.semanticWeight === state.settings.semanticWeight && r.keywordWeight === state.settings.keywordWeight;
    return element("tr", { className: isCurrent ? "current" : "" },
      element("td", {}, r.dataset || "—"), element("td", {}, String(r.semanticWeight)),
      element("td", {}, String(r.keywordWeight)), element("td", {}, r.recall[k].toFixed(3)));
  });
  $("eval-table").replaceChildren(header, ...body);
}

// recall@k against the keyword share of the weights, a line per dataset, with ticks and
// grid lines on both axes and a legend under the plot; the current weights are the dashed
// line.
const PLOT = { width: 660, height: 340, left: 60, right: 48, top: 20, bottom: 84 };

function svgNode(tag, attributes, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  node.append(...children);
  return node;
}

function recallRange(values) {
  const low = Math.max(0, Math.floor(Math.min(...values) * 20) / 20);
  const high = Math.min(1, Math.ceil(Math.max(...values) * 20) / 20);
  return high > low ? [low, high] : [Math.max(0, low - 0.05), Math.min(1, high + 0.05)];
}

function evalPlot(rows, k, current) {
  const { width, height, left, right, top, bottom } = PLOT;
  const [low, high] = recallRange(rows.map((r) => r.recall[k]));
  const x = (share) => left + share * (width - left - right);
  const y = (value) => height - bottom - ((value - low) / (high - low)) * (height - top - bottom);
  const plot = svgNode("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `recall@${k} against the weights` });
  plot.append(...axes(x, y, low, high, k));
  const datasets = [...new Set(rows.map((r) => r.dataset || "results"))];
  datasets.forEach((name, index) => plot.append(...series(rows, name, index, k, x, y)));
  plot.append(...legend(datasets));
  if (current !== null) {
    plot.append(svgNode("line", { x1: x(current), y1: top, x2: x(current), y2: height - bottom, class: "current" }),
      svgNode("text", { x: x(current) + 4, y: top + 12, class: "label" }, "current weights"));
  }
  return plot;
}

function axes(x, y, low, high, k) {
  const { width, height, left, right, top, bottom } = PLOT;
  const nodes = [
    svgNode("line", { x1: left, y1: height - bottom, x2: width - right, y2: height - bottom, class: "axis" }),
    svgNode("line", { x1: left, y1: top, x2: left, y2: height - bottom, class: "axis" }),
    svgNode("text", { x: (left + width - right) / 2, y: height - bottom + 38, class: "label middle" },
      "keyword share of the weights: keywordWeight / (semanticWeight + keywordWeight)"),
    svgNode("text", { x: 14, y: (top + height - bottom) / 2, class: "label middle", transform: `rotate(-90 14 ${(top + height - bottom) / 2})` },
      `evidence recall@${k}`),
  ];
  for (const share of [0, 0.25, 0.5, 0.75, 1]) {
    nodes.push(svgNode("line", { x1: x(share), y1: height - bottom, x2: x(share), y2: height - bottom + 5, class: "axis" }),
      svgNode("text", { x: x(share), y: height - bottom + 18, class: "tick middle" }, share === 0 ? "0 (semantic)" : share === 1 ? "1 (keyword)" : String(share)));
  }
  const step = high - low > 0.3 ? 0.1 : 0.05;
  for (let value = Math.ceil(low / step - 1e-9) * step; value <= high + 1e-9; value += step) {
    nodes.push(svgNode("line", { x1: left, y1: y(value), x2: width - right, y2: y(value), class: "grid" }),
      svgNode("text", { x: left - 6, y: y(value) + 4, class: "tick end" }, value.toFixed(2)));
  }
  return nodes;
}

function series(rows, name, index, k, x, y) {
  const points = rows
    .filter((r) => (r.dataset || "results") === name)
    .map((r) => [keywordShare(r), r.recall[k], r])
    .sort((a, b) => a[0] - b[0]);
  const line = points.map(([share, value]) => `${x(share)},${y(value)}`).join(" ");
  const nodes = [svgNode("polyline", { points: line, class: `series s${index % 4}` })];
  for (const [share, value, row] of points) {
    nodes.push(svgNode("circle", { cx: x(share), cy: y(value), r: 4, class: `series s${index % 4}` },
      svgNode("title", {}, `${name} ${row.semanticWeight}/${row.keywordWeight}: ${value.toFixed(3)}`)));
  }
  return nodes;
}

function legend(datasets) {
  const { height, left } = PLOT;
  return datasets.flatMap((name, index) => {
    const at = left + index * 150;
    return [svgNode("line", { x1: at, y1: height - 16, x2: at + 24, y2: height - 16, class: `series s${index % 4}` }),
      svgNode("text", { x: at + 30, y: height - 12, class: "label legend" }, name)];
  });
}

// -- wiring -----------------------------------------------------------------------------

function showView(name) {
  for (const tab of document.querySelectorAll("[role=tab]")) {
    tab.setAttribute("aria-selected", String(tab.dataset.view === name));
  }
  for (const view of document.querySelectorAll(".view")) view.hidden = view.id !== name;
  if (name === "eval") {
    drawEval();
    guarded(evalOnFirstView)();
  }
}

const start = guarded(async () => {
  clearMessage();
  await Promise.all([loadProjects(), loadSessions(), loadSettings()]);
});

function wire() {
  $("key").value = sessionStorage.getItem(KEY_SLOT) || "";
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY_SLOT, $("key").value.trim());
    start();
  });
  for (const tab of document.querySelectorAll("[role=tab]")) {
    tab.addEventListener("click", () => showView(tab.dataset.view));
  }
  $("project").addEventListener("change", guarded(async () => {
    state.projectId = $("project").value;
    await loadSessions();
  }));
  $("more-sessions").addEventListener("click", guarded(() => loadSessions(false)));
  $("prev-page").addEventListener("click", guarded(() => {
    state.episodeOffset = Math.max(0, state.episodeOffset - PAGE_SIZE);
    return loadEpisodes();
  }));
  $("next-page").addEventListener("click", guarded(() => {
    state.episodeOffset += PAGE_SIZE;
    return loadEpisodes();
  }));
  $("search-form").addEventListener("submit", guarded(searchScope));
  $("ask-form").addEventListener("submit", guarded(ask));
  $("semantic-weight").addEventListener("input", weightsMoved);
  $("keyword-weight").addEventListener("input", weightsMoved);
  $("limit").addEventListener("input", limitChanged);
  $("budget").addEventListener("input", limitChanged);
  $("fusion").addEventListener("change", () => { showWeights(); limitChanged(); });
  $("save-weights").addEventListener("click", guarded(saveWeights));
  $("eval-load").addEventListener("click", guarded(loadEvalFromServer));
  $("eval-file").addEventListener("change", loadEvalFile);
  $("eval-k").addEventListener("change", drawEval);
  start();
}

wire();
