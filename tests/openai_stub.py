"""A real HTTP server on loopback that speaks the OpenAI chat-completions protocol.

It answers with a fixed reply (streamed word by word when asked), and can be told to fail
or to stall, so chat is tested against HTTP as it really is, not against a patched function.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class StubState:
    def __init__(self) -> None:
        self.reply = "Your dog is called Biscuit."
        self.mode = "ok"  # ok | error | stall | garbage (chat completions)
        self.embed_mode = "ok"  # the same, for /embeddings
        self.stall_seconds = 3.0
        self.finish = "stop"  # the finish reason it answers with ("length": cut at max_tokens)
        self.cut = False  # a stream that stops with neither a finish reason nor [DONE]
        self.requests: list[dict[str, Any]] = []


class _Handler(BaseHTTPRequestHandler):
    state: StubState

    def log_message(self, *args: object) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.state.requests.append(
            {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
        )
        if self.path.endswith("/embeddings"):
            return self._embeddings(body)
        if self._failed(self.state.mode):
            return None
        if self.state.mode == "stall":
            time.sleep(self.state.stall_seconds)
        if body.get("stream"):
            return self._stream(bool((body.get("stream_options") or {}).get("include_usage")))
        message = {"role": "assistant", "content": self.state.reply}
        choice = {"index": 0, "message": message, "finish_reason": self.state.finish}
        answer = {"choices": [choice], "model": body["model"]}
        self._send(200, {**answer, "usage": self._usage()})

    def _failed(self, mode: str) -> bool:
        """Answers as a broken endpoint would, for the modes that fail at once."""
        if mode == "error":
            self._send(500, {"error": {"message": "model crashed"}})
        elif mode == "garbage":
            self._raw(200, b"<html>upstream proxy says hello</html>")
        return mode in ("error", "garbage")

    def _embeddings(self, body: dict[str, Any]) -> None:
        """Deterministic 8-dimensional vectors: a text's letters, counted by their code
        modulo 8, so texts that share words are near."""
        if self._failed(self.state.embed_mode):
            return
        if self.state.embed_mode == "stall":
            time.sleep(self.state.stall_seconds)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for i, text in enumerate(texts):
            vector = [0.0] * 8
            for char in text.lower():
                if char.isalpha():
                    vector[ord(char) % 8] += 1.0
            data.append({"index": i, "embedding": [v + 0.01 for v in vector]})
        self._send(200, {"data": data, "model": body["model"]})

    def _raw(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _usage(self) -> dict[str, int]:
        """Token counts as a real endpoint reports them: here, words."""
        completion = len(self.state.reply.split())
        return {
            "prompt_tokens": 11,
            "completion_tokens": completion,
            "total_tokens": 11 + completion,
        }

    def _stream(self, usage: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for word in self.state.reply.split(" "):
            chunk = {"choices": [{"index": 0, "delta": {"content": word + " "}}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        if self.state.cut:
            return
        last = {"choices": [{"index": 0, "delta": {}, "finish_reason": self.state.finish}]}
        self.wfile.write(f"data: {json.dumps(last)}\n\n".encode())
        if usage:
            self.wfile.write(
                f"data: {json.dumps({'choices': [], 'usage': self._usage()})}\n\n".encode()
            )
        self.wfile.write(b"data: [DONE]\n\n")


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up on a stalled answer closed its end: nothing to report."""


@contextmanager
def openai_stub() -> Iterator[tuple[str, StubState]]:
    """Yields the base URL (…/v1) and the state that steers the server."""
    state = StubState()
    handler = type("Handler", (_Handler,), {"state": state})
    server = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", state
    finally:
        server.shutdown()
        server.server_close()
