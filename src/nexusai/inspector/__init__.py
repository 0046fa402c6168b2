"""The memory inspector: a page at /ui that shows, for a message, where each memory stood in
each leg and how the fused order moves with the weights.

A face, like the CLI and MCP: the page is static files from this package (no CDN, works
offline) that call the same HTTP API as everyone else, with the key the user types into it.
The only route of its own hands the page the evaluation results saved in the data
directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.staticfiles import StaticFiles

from nexusai.errors import NotFound
from nexusai.http import errors

PAGE_DIR = Path(__file__).parent / "ui"
EVAL_FILE = "eval-results.json"


def install_inspector(app: FastAPI) -> None:
    app.add_api_route("/eval-results", eval_results, tags=["service"], responses=errors(404, 422))
    app.mount("/ui", StaticFiles(directory=PAGE_DIR, html=True), name="ui")


def eval_results(request: Request) -> dict[str, Any]:
    """The `nexus eval` results saved as eval-results.json in the data directory (what the
    inspector plots); 404 when there are none."""
    path: Path = request.app.state.config.data_dir / EVAL_FILE
    if not path.is_file():
        raise NotFound(
            f"no evaluation results: run `nexus eval all --json {path}`, or open a results"
            " file on the page"
        )
    try:
        results: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NotFound(f"{path.name} in the data directory is not readable JSON: {exc}") from exc
    return results
