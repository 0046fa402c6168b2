"""The one place an HTTP client for a nexusai service (or an OpenAI-compatible endpoint) is
built: base URL, bearer key, time-out."""

from __future__ import annotations

import httpx


def bearer_client(
    base_url: str,
    api_key: str | None,
    timeout: float,
    transport: httpx.BaseTransport | None = None,
) -> httpx.Client:
    """An httpx client that sends `Authorization: Bearer <key>` when a key is given."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(
        base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
    )
