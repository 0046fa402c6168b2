// A typed client for nexusai's HTTP API, on the platform's own `fetch` (Node 20+, browsers,
// Deno, Bun): no runtime dependency. Every method is one request; errors are typed
// (`errors.ts`) and carry the API's `detail`.

import { errorFor, InvalidInputError, UnavailableError } from "./errors.js";
import type {
  ChatEvent,
  ChatOut,
  ContextOptions,
  ContextOut,
  EditedEpisodeOut,
  EntityDetail,
  EntityOut,
  EpisodeDetailOut,
  EpisodeIn,
  EpisodeFilter,
  EpisodeOut,
  ForgetOut,
  MarkedEpisodeOut,
  RecalledOut,
  StoredEpisodeOut,
  EpisodePatch,
  Health,
  ImportFormat,
  ImportOut,
  ProjectOut,
  Readiness,
  ScoredEpisodeOut,
  SessionOut,
  Settings,
  TurnOptions,
} from "./types.js";

export interface ClientOptions {
  /** Where the service listens; default `NEXUS_URL`, else http://127.0.0.1:4000. */
  baseUrl?: string;
  /** The service's API key, when it has one; default `NEXUS_API_KEY`. */
  apiKey?: string;
  /** A `fetch` of your own (a proxy, a test double at the transport). */
  fetch?: typeof fetch;
}

export interface Page {
  limit?: number;
  offset?: number;
}

type Query = Record<string, string | number | boolean | string[] | undefined | null>;

function fromEnv(name: string): string | undefined {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  return env?.[name] || undefined;
}

export class NexusClient {
  readonly baseUrl: string;
  private readonly apiKey: string | undefined;
  private readonly fetcher: typeof fetch;

  constructor(options: ClientOptions = {}) {
    this.baseUrl = (options.baseUrl ?? fromEnv("NEXUS_URL") ?? "http://127.0.0.1:4000").replace(/\/+$/, "");
    this.apiKey = options.apiKey ?? fromEnv("NEXUS_API_KEY")?.split(",")[0]?.trim();
    this.fetcher = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  // -- projects ---------------------------------------------------------------------------

  /** `retentionDays`: each episode is kept that long after it was said. */
  createProject(name: string, retentionDays?: number): Promise<ProjectOut> {
    return this.send("POST", "/projects", { body: retentionDays === undefined ? { name } : { name, retentionDays } });
  }

  /** Keeps the project's episodes `days` after they were said (null: no limit but each one's own expiry). */
  setRetention(projectId: number, days: number | null): Promise<ProjectOut> {
    return this.send("PATCH", `/projects/${projectId}`, { body: { retentionDays: days } });
  }

  /** The project as JSONL, in the format `importFile` reads. */
  async exportProject(projectId: number): Promise<string> {
    return (await this.request("GET", `/projects/${projectId}/export`, {})).text();
  }

  listProjects(page: Page = {}): Promise<ProjectOut[]> {
    return this.send("GET", "/projects", { query: { ...page } });
  }

  getProject(projectId: number): Promise<ProjectOut> {
    return this.send("GET", `/projects/${projectId}`);
  }

  deleteProject(projectId: number): Promise<void> {
    return this.send("DELETE", `/projects/${projectId}`);
  }

  // -- sessions ---------------------------------------------------------------------------

  createSession(options: { projectId?: number | null; title?: string | null } = {}): Promise<SessionOut> {
    return this.send("POST", "/sessions", { body: options });
  }

  /** The session with this title in the named project (or in none), made when missing. */
  resolveSession(title: string, project?: string | null): Promise<SessionOut> {
    return this.send("POST", "/sessions/resolve", { body: { title, project: project ?? null } });
  }

  listSessions(options: Page & { projectId?: number; order?: "id" | "started" } = {}): Promise<SessionOut[]> {
    return this.send("GET", "/sessions", { query: { ...options } });
  }

  getSession(sessionId: number): Promise<SessionOut> {
    return this.send("GET", `/sessions/${sessionId}`);
  }

  /** Rename a session, or move it into (`projectId: 3`) or out of (`projectId: null`) a project. */
  updateSession(sessionId: number, changes: { title?: string | null; projectId?: number | null }): Promise<SessionOut> {
    return this.send("PATCH", `/sessions/${sessionId}`, { body: changes });
  }

  deleteSession(sessionId: number): Promise<void> {
    return this.send("DELETE", `/sessions/${sessionId}`);
  }

  // -- episodes ---------------------------------------------------------------------------

  addEpisode(sessionId: number, episode: EpisodeIn): Promise<StoredEpisodeOut> {
    return this.send("POST", `/sessions/${sessionId}/episodes`, { body: episode });
  }

  /** A batch, all or nothing; stored once however often it is sent with the same
   * `idempotencyKey` (a retry after a timeout sends the one it was given). */
  async addEpisodes(sessionId: number, episodes: EpisodeIn[], idempotencyKey?: string): Promise<StoredEpisodeOut[]> {
    const stored = await this.send<{ episodes: StoredEpisodeOut[] }>("POST", `/sessions/${sessionId}/episodes`, {
      body: { episodes },
      idempotencyKey,
    });
    return stored.episodes;
  }

  /** A session's episodes in time order; with a `filter`, only those it keeps. */
  async listEpisodes(sessionId: number, page: Page & { filter?: EpisodeFilter } = {}): Promise<EpisodeOut[]> {
    const { filter, ...paged } = page;
    return this.send("GET", `/sessions/${sessionId}/episodes`, { query: { ...paged, ...filterQuery(filter) } });
  }

  /** Each episode with its vector state and the entities it mentions. */
  listEpisodeDetails(sessionId: number, page: Page = {}): Promise<EpisodeDetailOut[]> {
    return this.send("GET", `/sessions/${sessionId}/episodes`, { query: { ...page, detail: true } });
  }

  getEpisode(episodeId: number): Promise<MarkedEpisodeOut> {
    return this.send("GET", `/episodes/${episodeId}`);
  }

  /** Fields given change; `metadata` is a JSON merge patch (RFC 7396). */
  updateEpisode(episodeId: number, changes: EpisodePatch): Promise<EditedEpisodeOut> {
    return this.send("PATCH", `/episodes/${episodeId}`, { body: changes });
  }

  /** Pinned, every turn of its scope carries it (under `standing`); `false` unpins it. */
  pin(episodeId: number, pinned = true): Promise<EditedEpisodeOut> {
    return this.updateEpisode(episodeId, { pinned });
  }

  /** The pinned and standing episodes of these sessions (all the key sees when none) that
   * the filter keeps, pinned first. */
  async standing(options: { sessionIds?: number[]; limit?: number; filter?: EpisodeFilter } = {}): Promise<MarkedEpisodeOut[]> {
    const query = { sessionIds: options.sessionIds?.join(","), limit: options.limit };
    return this.send("GET", "/episodes/standing", { query: { ...query, ...filterQuery(options.filter) } });
  }

  deleteEpisode(episodeId: number): Promise<void> {
    return this.send("DELETE", `/episodes/${episodeId}`);
  }

  /** Keyword (BM25) search, best first; FTS5 syntax in `q` is searched for, never parsed. */
  async search(
    q: string,
    options: { sessionIds?: number[]; limit?: number; explain?: boolean; filter?: EpisodeFilter } = {},
  ): Promise<ScoredEpisodeOut[]> {
    const query = { q, limit: options.limit, sessionIds: options.sessionIds?.join(","), explain: options.explain };
    return this.send("GET", "/episodes/search", { query: { ...query, ...filterQuery(options.filter) } });
  }

  /** Deletes the episodes of these sessions (all the key sees when none) that the filter keeps; `dryRun` only counts them. */
  async forget(options: { sessionIds?: number[]; filter?: EpisodeFilter; dryRun?: boolean }): Promise<ForgetOut> {
    if (options.filter != null && typeof options.filter === "object" && isEmptyFilter(options.filter)) {
      checkFilter(options.filter);
      throw new InvalidInputError(422, "filter: it is empty and would forget whole sessions; leave filter out to forget the whole session");
    }
    const query = { sessionIds: options.sessionIds?.join(","), dryRun: options.dryRun || undefined };
    return this.send("DELETE", "/episodes", { query: { ...query, ...filterQuery(options.filter) } });
  }

  // -- a turn -----------------------------------------------------------------------------

  /** What a chat turn with this message would give the LLM, without calling it. */
  async context(sessionId: number, message: string, options: ContextOptions = {}): Promise<ContextOut> {
    return this.send("POST", "/context", { body: turnBody(sessionId, message, options) });
  }

  /** A search of the session's memory, not a chat turn: its latest messages are searched
   * too (`recentLimit` 0 for this call), the `k` best matches with their scores; with a
   * `budget`, what fits that many tokens, at most `k`; with a `filter`, only what it keeps.
   * The turn's standing memories (pinned, the user's rules and preferences) come after the
   * `k` best, each marked `standing`, never in their place; `standing: false` leaves them
   * out and ranks a rule as any other episode. */
  async recall(
    sessionId: number,
    query: string,
    options: { k?: number; budget?: number; filter?: EpisodeFilter; standing?: boolean } = {},
  ): Promise<RecalledOut[]> {
    const k = options.k ?? 10;
    if (!Number.isInteger(k) || k < 1 || k > 100) throw new InvalidInputError(422, `k: give a whole number from 1 to 100, not ${k}`);
    const withStanding = options.standing ?? true;
    const settings: Partial<Settings> = { recentLimit: 0, semanticLimit: k, ...(withStanding ? {} : { standingLimit: 0 }) };
    const turn = await this.context(sessionId, query, { explain: true, settings, budget: options.budget, filter: options.filter });
    const marks = new Map((turn.standing ?? []).map((s) => [s.id, s.pinned ? "pinned" : s.standing] as const));
    const best: RecalledOut[] = turn.memories.slice(0, k).map((m) => ({ ...m, standing: marks.get(m.id) ?? null }));
    if (!withStanding) return best;
    const shown = new Set(best.map((m) => m.id));
    const after = (turn.standing ?? [])
      .filter((s) => !shown.has(s.id))
      .map(({ pinned: _p, similarity: _m, expiresAt: _e, ...kept }) => ({ ...kept, standing: marks.get(kept.id) ?? null }) as RecalledOut);
    return [...best, ...after];
  }

  /** One chat turn: context, the LLM's reply, both messages stored. The same message sent
   * again while its turn runs, or after it when the answer was lost to a time-out, is
   * answered once; said again after its answer, it is a new turn. An `idempotencyKey` says
   * which calls are the same turn instead. */
  async chat(sessionId: number, message: string, idempotencyKey?: string, options: TurnOptions = {}): Promise<ChatOut> {
    return this.send("POST", "/chat", { body: turnBody(sessionId, message, options), idempotencyKey });
  }

  /** The same turn streamed: a `context` event, `delta`s, then `done` or `error`. */
  async *chatStream(sessionId: number, message: string, options: TurnOptions = {}): AsyncGenerator<ChatEvent> {
    const response = await this.request("POST", "/chat", { body: { ...turnBody(sessionId, message, options), stream: true } });
    if (!response.body) return;
    let event = "";
    for await (const line of lines(response.body)) {
      if (line.startsWith("event: ")) event = line.slice(7);
      else if (line.startsWith("data: ")) yield chatEvent(event, JSON.parse(line.slice(6)));
    }
  }

  // -- settings, entities, import, service -------------------------------------------------

  getSettings(): Promise<Settings> {
    return this.send("GET", "/settings");
  }

  updateSettings(changes: Partial<Settings>): Promise<Settings> {
    return this.send("PATCH", "/settings", { body: changes });
  }

  /** The entities a session can see: by meaning (`q`), by name (`prefix`), or the most mentioned. */
  entities(sessionId: number, options: { q?: string; prefix?: string; limit?: number } = {}): Promise<EntityOut[]> {
    return this.send("GET", "/entities", { query: { sessionId, ...options } });
  }

  /** One entity and the episodes that mention it. */
  entity(entityId: number, page: Page = {}): Promise<EntityDetail> {
    return this.send("GET", `/entities/${entityId}`, { query: { ...page } });
  }

  /** Import a file's bytes (LoCoMo, a ChatGPT export, or JSONL): all or nothing. */
  importFile(data: Uint8Array | string, format: ImportFormat, project?: string): Promise<ImportOut> {
    return this.send("POST", "/import", {
      query: { format, project },
      raw: data,
      contentType: "application/octet-stream",
    });
  }

  health(): Promise<Health> {
    return this.send("GET", "/health");
  }

  ready(): Promise<Readiness> {
    return this.send("GET", "/ready");
  }

  // -- the one way a request goes ---------------------------------------------------------

  private async send<T>(method: string, path: string, parts: RequestParts = {}): Promise<T> {
    const response = await this.request(method, path, parts);
    if (response.status === 204) return undefined as T;
    return (await response.json()) as T;
  }

  private async request(method: string, path: string, parts: RequestParts): Promise<Response> {
    const headers: Record<string, string> = { Accept: "application/json" };
    if (this.apiKey) headers.Authorization = `Bearer ${this.apiKey}`;
    if (parts.idempotencyKey) headers["Idempotency-Key"] = parts.idempotencyKey;
    let body: BodyInit | undefined;
    if (parts.raw !== undefined) {
      body = parts.raw as BodyInit;
      headers["Content-Type"] = parts.contentType ?? "application/octet-stream";
    } else if (parts.body !== undefined) {
      body = JSON.stringify(parts.body);
      headers["Content-Type"] = "application/json";
    }
    let response: Response;
    try {
      response = await this.fetcher(this.url(path, parts.query), { method, headers, body });
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      throw new UnavailableError(0, `no nexusai service answers at ${this.baseUrl} (${why})`);
    }
    if (!response.ok) throw errorFor(response.status, await detailOf(response));
    return response;
  }

  private url(path: string, query: Query = {}): string {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) {
      if (Array.isArray(value)) for (const item of value) params.append(key, item);
      else if (value !== undefined && value !== null) params.set(key, String(value));
    }
    const text = params.toString();
    return `${this.baseUrl}${path}${text ? `?${text}` : ""}`;
  }
}

interface RequestParts {
  query?: Query;
  idempotencyKey?: string;
  body?: unknown;
  raw?: Uint8Array | string;
  contentType?: string;
}

async function detailOf(response: Response): Promise<string> {
  const text = await response.text();
  try {
    const parsed = JSON.parse(text) as { detail?: unknown };
    if (parsed.detail !== undefined) return String(parsed.detail);
  } catch {
    // not JSON: the text itself says what went wrong
  }
  return text.slice(0, 300) || response.statusText;
}

async function* lines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let pending = "";
  for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) {
    pending += decoder.decode(chunk, { stream: true });
    let at: number;
    while ((at = pending.indexOf("\n")) >= 0) {
      yield pending.slice(0, at).replace(/\r$/, "");
      pending = pending.slice(at + 1);
    }
  }
  if (pending) yield pending;
}

function chatEvent(event: string, data: Record<string, unknown>): ChatEvent {
  switch (event) {
    case "context":
      return { event, context: data as unknown as ContextOut };
    case "delta":
      return { event, text: String(data.text ?? "") };
    case "done":
      return {
        event,
        reply: String(data.reply ?? ""),
        userEpisodeId: Number(data.userEpisodeId),
        assistantEpisodeId: (data.assistantEpisodeId as number | null) ?? null,
      };
    default:
      return { event: "error", detail: String(data.detail ?? event), userEpisodeId: (data.userEpisodeId as number | null) ?? null };
  }
}

/** What `/context` and `/chat` both take: the message, this turn's own settings (`budget`
 * is its contextBudget), its filter and its time, and for `/context` what to explain. */
function turnBody(sessionId: number, message: string, options: ContextOptions): Record<string, unknown> {
  const { budget, settings, ...rest } = options;
  checkFilter(options.filter);
  const turn = budget === undefined ? settings : { ...settings, contextBudget: budget };
  return { sessionId, message, ...rest, ...(turn ? { settings: turn } : {}) };
}

const FILTER_KEYS = new Set(["after", "before", "speaker", "metadata"]);

/** Refuses, before anything is sent, what the query string would not carry as asked: a
 * key it does not know (`speakers`, a metadata key outside `metadata`) would be dropped and
 * a one-of list with nothing in it would arrive as no condition at all, so a `forget`
 * would take the whole session. Every other face refuses both too (422). */
function checkFilter(filter: EpisodeFilter | undefined): void {
  if (filter === undefined || filter === null) return;
  if (typeof filter !== "object" || Array.isArray(filter)) {
    throw new InvalidInputError(422, "filter: give an object with after, before, speaker or metadata");
  }
  for (const key of Object.keys(filter)) {
    if (!FILTER_KEYS.has(key)) {
      throw new InvalidInputError(
        422,
        `filter.${key}: unknown key; a filter takes after, before, speaker and metadata (a metadata key goes inside metadata)`,
      );
    }
  }
  if (Array.isArray(filter.speaker) && filter.speaker.length === 0) {
    throw new InvalidInputError(422, "filter.speaker: name at least one speaker, or leave speaker out");
  }
  if (filter.speaker != null && !Array.isArray(filter.speaker)) {
    throw new InvalidInputError(422, "filter.speaker: give a list of speakers");
  }
  for (const [key, value] of Object.entries(filter.metadata ?? {})) {
    if (Array.isArray(value) && value.length === 0) {
      throw new InvalidInputError(422, `filter.metadata.${key}: give at least one value, or leave the key out`);
    }
  }
}

/** True when the filter keeps every episode: nothing in it narrows. */
function isEmptyFilter(filter: EpisodeFilter): boolean {
  const metadata = filter.metadata ?? {};
  return filter.after == null && filter.before == null && filter.speaker == null && Object.keys(metadata).length === 0;
}

/** A filter as the query string carries it: a metadata value goes as text ("1"), which the
 * service compares as text and, when it reads as one, as a number (1 matches 1.0). */
function filterQuery(filter: EpisodeFilter | undefined): Query {
  checkFilter(filter);
  if (!filter) return {};
  const query: Query = { after: filter.after ?? undefined, before: filter.before ?? undefined, speaker: filter.speaker ?? undefined };
  for (const [key, value] of Object.entries(filter.metadata ?? {})) {
    const values = Array.isArray(value) ? value : [value];
    query[`metadata.${key}`] = values.map((v) => (typeof v === "string" ? v : JSON.stringify(v)));
  }
  return query;
}
