export { NexusClient } from "./client.js";
export type { ClientOptions, Page } from "./client.js";
export * from "./errors.js";
export type * from "./types.js";
