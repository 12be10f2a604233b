"""One remote OpenAI-compatible server over HTTP: a bounded connection pool, timeouts,
retries with backoff on 429 and 5xx, and whether it is up.

Its answers map onto what the server does with them: a connection refused or reset marks the
remote down at once (the engine sends the read to another remote, or the call ends
UNAVAILABLE), a 4xx other than 408 and 429 refuses the one request (its items fail, naming
the remote's reason), and a remote that stays busy past the retries fails the request
UNAVAILABLE without being marked down.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from typing import Any

import aiohttp

from geval_server.engine.protocol import EngineRequestError

log = logging.getLogger(__name__)

RETRIED = frozenset({408, 429, 500, 502, 503, 504})
BACKOFF_S = 0.5  # the first retry's wait; each further one doubles it, with jitter
MOST_BACKOFF_S = 8.0
PROBE_TIMEOUT_S = 5.0  # a health probe (GET /models): a live server answers in milliseconds
# Probes in a row that time out before the remote is marked down: a server that accepts
# connections but answers nothing (hung) is down, one whose event loop is only slow under load
# is not. A refused connection or an error status marks it down at once.
PROBE_TIMEOUTS_DOWN = 3


class RemoteDown(ConnectionError):
    """The remote could not be reached: it is marked down."""


class Remote:
    """One server, by its OpenAI base URL (…/v1). `post` and `probe` run in the event loop
    that first calls them: the session is made there."""

    def __init__(self, url: str, api_key: str | None, max_connections: int, timeout_s: float,
                 retries: int) -> None:
        self.url = url
        self.up = True
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._max_connections = max_connections
        # The limit is on the remote's answer (the time to its first byte, then between bytes),
        # not on the wait for a pooled connection: a call's reads queue for the pool by design.
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=PROBE_TIMEOUT_S, sock_read=timeout_s)
        self._retries = retries
        self._session: aiohttp.ClientSession | None = None
        self._probe_timeouts = 0

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            # limit: connections open at once; requests beyond wait for one (the bounded pool).
            connector = aiohttp.TCPConnector(limit=self._max_connections, limit_per_host=self._max_connections)
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers,
                                                  json_serialize=json.dumps)
        return self._session

    def close(self) -> None:
        """Closes its connections at once, as a shutdown (not a coroutine) needs. aiohttp's
        TCPConnector.close is a coroutine only to close its DNS resolver too (the default one,
        a thread pool's, holds nothing); the base connector's close shuts every transport as
        it is called."""
        if self._session is not None:
            connector = self._session.connector
            self._session.detach()
            if connector is not None:
                aiohttp.BaseConnector.close(connector)
            self._session = None

    def mark(self, up: bool, why: str = "") -> None:
        if up != self.up:
            if up:
                log.info("remote judge server %s is up again", self.url)
            else:
                log.error("remote judge server %s is down: %s", self.url, why)
        self.up = up

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """The JSON answer to a POST; retried on 408, 429, 5xx, a timeout or a dropped
        connection, each retry after twice the last wait (or the remote's Retry-After)."""
        failure = ""
        for attempt in range(self._retries + 1):
            wait = min(MOST_BACKOFF_S, BACKOFF_S * 2**attempt) * random.uniform(0.5, 1.0)
            try:
                async with self._client().post(self.url + path, json=body, timeout=self._timeout) as response:
                    if response.status == 200:
                        return await response.json(loads=json.loads, content_type=None)
                    reason = _reason(await response.text())
                    if response.status not in RETRIED:
                        code = "INVALID_ARGUMENT" if response.status in (400, 413, 422) else "FAILED_PRECONDITION"
                        raise EngineRequestError(code, f"the judge server {self.url} refused the request "
                                                       f"(HTTP {response.status}): {reason}")
                    failure = f"HTTP {response.status}: {reason}"
                    wait = _retry_after(response.headers.get("Retry-After"), wait)
            except aiohttp.ClientConnectorError as error:  # nothing listens there (or no route)
                self.mark(False, str(error))
                raise RemoteDown(f"the judge server {self.url} cannot be reached: {error}") from error
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, asyncio.TimeoutError) as error:
                failure = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            if attempt < self._retries:
                await asyncio.sleep(wait)
        raise EngineRequestError("UNAVAILABLE", f"the judge server {self.url} did not answer after "
                                                f"{self._retries + 1} tries; the last: {failure}")

    async def reset_prefix_cache(self) -> None:
        """POST /reset_prefix_cache beside /v1 (vLLM's, offered with VLLM_SERVER_DEV_MODE=1)."""
        root = self.url.removesuffix("/v1")
        async with self._client().post(root + "/reset_prefix_cache", timeout=self._timeout) as response:
            if response.status != 200:
                raise EngineRequestError("FAILED_PRECONDITION", f"{root}/reset_prefix_cache answered HTTP "
                                         f"{response.status} (vLLM offers it with VLLM_SERVER_DEV_MODE=1)")

    async def probe(self) -> dict[str, Any] | None:
        """GET /models: the served models (the remote is up), or None (down, or not answering)."""
        try:
            async with self._client().get(self.url + "/models",
                                          timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)) as response:
                self._probe_timeouts = 0
                if response.status == 200:
                    answer = await response.json(content_type=None)
                    self.mark(True)
                    return answer
                self.mark(False, f"GET /models answered HTTP {response.status}: {_reason(await response.text())}")
        except asyncio.TimeoutError:
            self._probe_timeouts += 1
            if self._probe_timeouts >= PROBE_TIMEOUTS_DOWN:
                self.mark(False, f"GET /models unanswered for {PROBE_TIMEOUTS_DOWN} probes of {PROBE_TIMEOUT_S:.0f} s")
        except aiohttp.ClientError as error:
            self.mark(False, f"{type(error).__name__}: {error}")
        return None


def _reason(text: str) -> str:
    """The remote's message: an OpenAI error body's `message`, else its text, shortened."""
    try:
        error = json.loads(text).get("error", {})
        message = error.get("message") if isinstance(error, dict) else str(error)
    except (ValueError, AttributeError):
        message = None
    return (message or text).strip()[:500]


def _retry_after(header: str | None, wait: float) -> float:
    """The remote's Retry-After in seconds, capped; the backoff where it gives none."""
    try:
        return min(MOST_BACKOFF_S, max(0.0, float(header))) if header else wait
    except ValueError:
        return wait
