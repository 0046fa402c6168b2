// The interfaces in src/types.ts against the running service's /openapi.json: the same
// fields, and the same ones optional, for every schema both name.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { after, before, test } from "node:test";

import { NexusClient } from "../src/index.js";
import { serve, type Served } from "./server.js";

interface Field {
  optional: boolean;
}

function interfaces(source: string): Map<string, Map<string, Field>> {
  const found = new Map<string, Map<string, Field>>();
  const pattern = /export interface (\w+)(?: extends (\w+))? \{([^}]*)\}/g;
  for (const [, name, parent, body] of source.matchAll(pattern)) {
    const fields = new Map<string, Field>(parent ? found.get(parent) ?? [] : []);
    for (const [, field, question] of body!.matchAll(/^\s+(\w+)(\?)?:/gm)) {
      fields.set(field!, { optional: question === "?" });
    }
    found.set(name!, fields);
  }
  return found;
}

let served: Served;
before(async () => {
  served = await serve();
});
after(async () => {
  await served.stop();
});

test("every interface matches its schema in /openapi.json", async () => {
  const spec = (await (await fetch(`${served.url}/openapi.json`)).json()) as {
    components: { schemas: Record<string, { properties?: Record<string, unknown>; required?: string[] }> };
  };
  const ours = interfaces(readFileSync(resolve("src/types.ts"), "utf8"));
  let compared = 0;
  for (const [name, fields] of ours) {
    const schema = spec.components.schemas[name];
    if (!schema) continue;
    compared += 1;
    const theirs = Object.keys(schema.properties ?? {}).sort();
    assert.deepEqual([...fields.keys()].sort(), theirs, `${name}: the fields differ`);
    const required = new Set(schema.required ?? []);
    for (const [field, { optional }] of fields) {
      assert.equal(optional, !required.has(field), `${name}.${field}: optional in one, required in the other`);
    }
  }
  assert.ok(compared >= 14, `only ${compared} interfaces matched a schema`);
});

test("the shared parameters are in the order clients/signatures.json gives", () => {
  // dist/test/ -> clients/signatures.json, read at run time (the Python tests read it too).
  const file = resolve(import.meta.dirname, "..", "..", "..", "signatures.json");
  const shared = JSON.parse(readFileSync(file, "utf8")) as { methods: Record<string, string[]> };
  for (const [name, params] of Object.entries(shared.methods)) {
    const method = (NexusClient.prototype as unknown as Record<string, (...args: unknown[]) => unknown>)[name];
    assert.ok(method, `NexusClient has no ${name}`);
    const source = method.toString();
    const declared = source.slice(source.indexOf("(") + 1, source.indexOf(")")).split(",");
    const names = declared.map((p) => p.split("=")[0]!.trim()).filter(Boolean);
    assert.deepEqual(names.slice(0, params.length), params, name);
  }
});
