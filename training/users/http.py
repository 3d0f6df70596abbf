"""An LLM user behind any OpenAI-compatible `/v1/chat/completions` endpoint (vLLM, llama.cpp's
server, a hosted API), through httpx.

Why: the paper lets the meta-agent swap the user simulator when the logs justify it (section 4.2);
a person lists the endpoints in the experiment's config and `user.<gym>.llm` picks one.

Settings, from the arguments or else the environment:
  base_url  EAU_USER_BASE_URL, then OPENAI_BASE_URL   (".../v1" or the server root)
  model     EAU_USER_MODEL, then OPENAI_MODEL
  api_key   the variable named by api_key_env, then EAU_USER_API_KEY, then OPENAI_API_KEY (optional)
Failures: a timeout, a refused connection, HTTP 429 or 5xx, or a body that is not a chat completion
is retried `retries` times with exponential backoff (backoff_s, 2*backoff_s, ...); other HTTP errors
are not retried. When every attempt failed the reply is UserReply(failed=True, error=<one
sentence>): the environment ends that episode marked failed and training goes on.
`respond_batch` sends the requests of a batch concurrently (max_concurrency threads).
"""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from training.benches.base import UserReply, UserState
from training.users.prompt import NO_REPLY_PENALTY, LLMUserConfigError, failed, user_messages


class _Retryable(Exception):
    pass


def _env(*names: str) -> str | None:
    for n in names:
        if n and os.environ.get(n):
            return os.environ[n]
    return None


def completions_url(base_url: str) -> str:
    base = base_url.rstrip("/")
    return base + ("/chat/completions" if base.endswith("/v1") else "/v1/chat/completions")


class HTTPLLMUser:
    arm = "llm"

    def __init__(self, base_url: str | None = None, model: str | None = None, api_key: str | None = None, *,
                 api_key_env: str | None = None, timeout_s: float = 30.0, retries: int = 2,
                 backoff_s: float = 0.5, max_tokens: int = 256, max_concurrency: int = 8):
        self.base_url = base_url or _env("EAU_USER_BASE_URL", "OPENAI_BASE_URL")
        self.model = model or _env("EAU_USER_MODEL", "OPENAI_MODEL")
        if not self.base_url:
            raise LLMUserConfigError("the HTTP LLM user has no base URL: set base_url in the config or "
                                     "EAU_USER_BASE_URL / OPENAI_BASE_URL.")
        if not self.model:
            raise LLMUserConfigError("the HTTP LLM user has no model name: set model in the config or "
                                     "EAU_USER_MODEL / OPENAI_MODEL.")
        self.api_key = api_key or _env(api_key_env or "", "EAU_USER_API_KEY", "OPENAI_API_KEY")
        self.url = completions_url(self.base_url)
        self.timeout_s, self.retries, self.backoff_s = float(timeout_s), int(retries), float(backoff_s)
        self.max_tokens, self.max_concurrency = int(max_tokens), int(max_concurrency)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self.client = httpx.Client(timeout=self.timeout_s, headers=headers)

    def respond(self, state: UserState) -> UserReply:
        body = {"model": self.model, "messages": user_messages(state), "max_tokens": self.max_tokens,
                "temperature": float(state.knobs.get("temperature", 0.7))}
        penalty = float(state.knobs.get("repetition_penalty", 1.0))
        if penalty != 1.0:
            return failed(NO_REPLY_PENALTY.format(who=f"the user LLM at {self.url}", value=penalty))
        last = "no attempt made"
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                return UserReply(text=self._post(body), arm="llm")
            except _Retryable as exc:
                last = str(exc)
            except httpx.HTTPStatusError as exc:
                return failed(f"user LLM at {self.url} refused the request (HTTP {exc.response.status_code}): "
                              f"{exc.response.text[:200]}")
        return failed(f"user LLM at {self.url} failed after {self.retries + 1} attempts: {last}")

    def _post(self, body: dict[str, Any]) -> str:
        try:
            resp = self.client.post(self.url, json=body)
        except httpx.TimeoutException:
            raise _Retryable(f"timed out after {self.timeout_s:g} s") from None
        except httpx.TransportError as exc:
            raise _Retryable(f"connection error ({type(exc).__name__})") from None
        if resp.status_code == 429 or resp.status_code >= 500:
            raise _Retryable(f"HTTP {resp.status_code}")
        resp.raise_for_status()
        try:
            text = resp.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise _Retryable(f"the reply is not a chat completion: {resp.text[:80]!r}") from None
        if not isinstance(text, str):
            raise _Retryable("the reply's message content is not text")
        return text.strip()

    def respond_batch(self, states: list[UserState]) -> list[UserReply]:
        if len(states) <= 1:
            return [self.respond(s) for s in states]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(states))) as pool:
            return list(pool.map(self.respond, states))

    def close(self) -> None:
        self.client.close()
