// A real `nexus serve` for the tests (or the one NEXUS_URL names), with a real HTTP server
// on loopback that speaks the OpenAI chat protocol as its LLM: the only thing stood in for.

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const REPLY = "Your dog is called Biscuit.";

export interface Served {
  url: string;
  stop(): Promise<void>;
}

function llmStub(): Promise<Server> {
  const server = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      const asked = JSON.parse(body || "{}") as { stream?: boolean };
      if (asked.stream) {
        response.writeHead(200, { "Content-Type": "text/event-stream" });
        for (const word of REPLY.split(" ")) {
          response.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: `${word} ` } }] })}\n\n`);
        }
        response.end("data: [DONE]\n\n");
        return;
      }
      response.writeHead(200, { "Content-Type": "application/json" });
      response.end(JSON.stringify({ choices: [{ index: 0, message: { role: "assistant", content: REPLY } }] }));
    });
  });
  return new Promise((done) => server.listen(0, "127.0.0.1", () => done(server)));
}

function freePort(): Promise<number> {
  const probe = createServer();
  return new Promise((done) =>
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => done(port));
    }),
  );
}

async function healthy(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`nexus serve exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${url}/health`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((wait) => setTimeout(wait, 250));
  }
  throw new Error("nexus serve did not answer /health within 120 s");
}

export async function serve(): Promise<Served> {
  if (process.env.NEXUS_URL) return { url: process.env.NEXUS_URL, stop: async () => {} };
  const llm = await llmStub();
  const port = await freePort();
  const python = process.env.NEXUS_PYTHON ?? resolve("../../.venv/bin/python");
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NEXUS_DATA_DIR: join(mkdtempSync(join(tmpdir(), "nexus-ts-")), "data"),
    NEXUS_EXTRACTOR: "none",
    NEXUS_LLM_BASE_URL: `http://127.0.0.1:${(llm.address() as AddressInfo).port}/v1`,
    NEXUS_LLM_MODEL: "stub",
  };
  delete env.NEXUS_API_KEY;
  const child = spawn(python, ["-m", "nexusai.cli", "serve", "--port", String(port)], { env, stdio: "ignore" });
  const url = `http://127.0.0.1:${port}`;
  await healthy(url, child);
  return {
    url,
    stop: async () => {
      child.kill("SIGTERM");
      await new Promise((done) => (child.exitCode !== null ? done(null) : child.once("exit", done)));
      await new Promise((done) => llm.close(done));
    },
  };
}
