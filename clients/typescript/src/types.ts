// The API's JSON, written once. Each interface is named after the schema in the service's
// /openapi.json, and a test compares them field by field (names, and which may be absent),
// so they cannot drift. Times are ISO 8601 text in UTC, as the API sends them.

export interface ProjectOut {
  id: number;
  name: string;
  createdAt: string;
  /** Its episodes are kept this many days after being said. */
  retentionDays?: number | null;
}

export interface SessionOut {
  id: number;
  projectId: number | null;
  title: string | null;
  createdAt: string;
  /** When the conversation began: its earliest episode's time (null: no episodes yet). */
  startedAt?: string | null;
}

export interface EpisodeIn {
  speaker: string;
  content: string;
  occurredAt?: string | null;
  imageCaption?: string | null;
  metadata?: Record<string, unknown> | null;
  /** From this time (ISO 8601) no read returns it, and the upkeep deletes it. */
  expiresAt?: string | null;
}

export interface EpisodePatch {
  content?: string | null;
  speaker?: string | null;
  occurredAt?: string | null;
  imageCaption?: string | null;
  metadata?: Record<string, unknown> | null;
  /** true pins it: every turn of its scope carries it, under `standing`; false unpins it. */
  pinned?: boolean | null;
  /** From this time no read returns it; null: never. */
  expiresAt?: string | null;
}

export interface EpisodeOut {
  id: number;
  sessionId: number;
  speaker: string;
  content: string;
  occurredAt: string;
  createdAt: string;
  metadata: Record<string, unknown>;
  imageCaption?: string | null;
}

/** An episode as a write stored it. */
export interface StoredEpisodeOut extends EpisodeOut {
  /** From this time no read returns it; null: never. In the past: stored already expired. */
  expiresAt?: string | null;
  /** What the write did beyond storing it: stored already past its expiry or its project's retention. */
  warnings?: string[];
}

export interface ScoredEpisodeOut extends EpisodeOut {
  /** The search's score: BM25 for a keyword search (higher is better). */
  score?: number | null;
  /** With `explain`: found by its own text, or only by the end of the turn before it. */
  matchedIn?: "message" | "turnBefore" | null;
}

export interface MarkedEpisodeOut extends EpisodeOut {
  /** Pinned: every turn of its scope carries it. */
  pinned: boolean;
  /** Recognised when stored as a rule the user set, or a lasting preference. */
  standing: "instruction" | "preference" | null;
  /** From this time no read returns it; null: never. */
  expiresAt?: string | null;
}

export interface EditedEpisodeOut extends MarkedEpisodeOut {
  /** What the edit did beyond its fields: moved past its retention or expiry, it is hidden at once. */
  warnings?: string[];
}

export interface StandingOut extends MarkedEpisodeOut {
  /** A recognised one's cosine to the message (pinned: null). */
  similarity?: number | null;
  /** What its line costs in the prompt. */
  tokens: number;
}

export interface EpisodeDetailOut extends MarkedEpisodeOut {
  vectorState: "pending" | "indexed";
  entities: string[];
}

export interface MovedOut {
  /** A feature of the learned ranker. */
  feature: string;
  /** Its value for this memory. */
  value: number;
  /** How much it moved the ranker's score (log-odds), up or down. */
  effect: number;
  /** What the feature is, in one line. */
  meaning?: string;
}

export interface MemoryOut extends EpisodeOut {
  /** Fused RRF score, or the learned ranker's score in log-odds (with `explain`). */
  score?: number | null;
  /** At fusion "learned", with `explain`: the ranker's chance (0 to 1) that it answers the message. */
  probability?: number | null;
  /** With `explain`: its 1-based rank in each source that found it, by the source's name. */
  ranks?: Record<string, number> | null;
  /** 1-based rank by meaning; null: not found by that leg. */
  semanticRank?: number | null;
  /** 1-based rank by keyword; null: not found by that leg. */
  keywordRank?: number | null;
  /** At fusion "learned", with `explain`: the three features that moved it most. */
  features?: MovedOut[] | null;
  /** At fusion "learned", with `explain`: "ranker", or "rrf" for the places (every third) given to RRF (1, 1)'s best not yet placed. */
  placedBy?: "ranker" | "rrf" | null;
  /** With a contextBudget: what its line costs in the prompt. */
  tokens?: number | null;
  /** With a contextBudget, when cut: where `content` is in the whole text. */
  excerpt?: ExcerptOut | null;
}

/** A memory as `recall` gives it: the `k` best matches, then the standing memories not among them. */
export interface RecalledOut extends MemoryOut {
  /** A standing memory's mark: pinned, or a rule or lasting preference of the user's; null: a match alone. */
  standing: "pinned" | "instruction" | "preference" | null;
}

export interface ExcerptOut {
  start: number;
  end: number;
  length: number;
}

export interface EntityOut {
  id: number;
  name: string;
  type: string;
  firstSeen: string;
  lastSeen: string;
  mentionCount: number;
  summary: string | null;
  latestMentionIds: number[];
}

export interface EntityDetail extends EntityOut {
  /** The episodes that mention it, newest first (a page of them). */
  mentions: EpisodeOut[];
}

export interface LegsOut {
  semantic: number[];
  keyword: number[];
  /** Every fused source's episode ids, best first, by the source's name. */
  lists?: Record<string, number[]>;
  terms: string[];
  rrfK: number;
  episodes: EpisodeOut[];
}

export interface ContextOut {
  sessionId: number;
  recent: EpisodeOut[];
  memories: MemoryOut[];
  entities: EntityOut[];
  warnings: string[];
  legs?: LegsOut | null;
  /** Pinned episodes, then the user's rules and preferences nearest the message; absent when the scope has none. */
  standing?: StandingOut[] | null;
  /** With a contextBudget: what the standing and memory sections of `prompt` cost, in all. */
  tokens?: number | null;
  /** The standing memories, memories and entities as the chat prompt gives them: grouped by conversation, dated. */
  prompt: string;
  /** The contextBudget this turn kept. */
  budget?: number | null;
  /** With timeAware filter: the time the message named, the only one searched. */
  timeWindow?: TimeWindowOut | null;
}

export interface TimeWindowOut {
  after: string;
  before: string;
  /** The message's words that named it. */
  said: string;
}

export interface ChatOut {
  reply: string | null;
  userEpisodeId: number;
  assistantEpisodeId: number | null;
  context: ContextOut;
}

export interface Settings {
  semanticWeight: number;
  keywordWeight: number;
  semanticLimit: number;
  recentLimit: number;
  entityLimit: number;
  /** Most index entries the keyword query may read (0: every word, the spec's query). */
  keywordBudget: number;
  /** Most tokens a turn's memories may cost (0: the first semanticLimit, whole). */
  contextBudget: number;
  /** With a contextBudget: most memories a turn gives (the budget decides up to this). */
  memoryLimit: number;
  /** How many of the user's recognised rules and preferences a turn carries (pinned ones come always). */
  standingLimit: number;
  /** How near the message (cosine) a recognised rule or preference must be to be carried; 0: no floor. */
  standingFloor: number;
  /** "auto" (time for a question about the order of events, else rank), "rank" (best
   * first) or "time" (by when each was said). */
  memoryOrder: "auto" | "rank" | "time";
  /** "filter": a time the message names ("last week", "in March") is the only one searched. */
  timeAware: "off" | "filter";
  /** "rrf" (the spec's weighted RRF) or "learned" (the ranker). */
  fusion: "rrf" | "learned";
}

/** Which episodes, as every face says it (FilterIn): times in ISO 8601, either open. */
export interface FilterIn {
  after?: string | null;
  before?: string | null;
  speaker?: string[] | null;
  metadata?: Record<string, string | number | boolean | (string | number | boolean)[]> | null;
}

export type EpisodeFilter = FilterIn;

export interface ForgetOut {
  episodes: number;
  episodeIds: number[];
  dryRun: boolean;
}

export interface ImportOut {
  conversations: number;
  sessions: number;
  episodes: number;
  skipped: number;
  seconds: number;
}

export interface Health {
  status: string;
  episodes: number;
  vectorsRebuilding?: number;
  entitiesPending?: number;
  vectorIndexOptimizing?: boolean;
}

export interface Readiness {
  status: string;
  embedder: string;
  memory: string;
  pendingVectors: number | null;
}

/** What a turn takes beside its message, for `context` and `chat` alike. */
export type TurnOptions = Omit<ContextOptions, "explain" | "legs">;

export type ContextOptions = {
  /** Each memory's fused score and both ranks. */
  explain?: boolean;
  /** Both legs' full ranked lists, the message's keyword terms and every candidate. */
  legs?: boolean;
  /** Settings for this turn only (any of `Settings`' names), never saved. */
  settings?: Partial<Settings>;
  /** The memories' tokens at most (`contextBudget` for this turn). */
  budget?: number;
  /** Only the episodes it keeps are searched, inside both legs. */
  filter?: EpisodeFilter;
  /** The turn's own time (ISO 8601), which a time the message names is read against (timeAware). */
  now?: string;
};

/** One server-sent event of a streamed chat turn. */
export type ChatEvent =
  | { event: "context"; context: ContextOut }
  | { event: "delta"; text: string }
  | { event: "done"; reply: string; userEpisodeId: number; assistantEpisodeId: number | null }
  | { event: "error"; detail: string; userEpisodeId: number | null };

export type ImportFormat = "locomo" | "chatgpt" | "jsonl";
