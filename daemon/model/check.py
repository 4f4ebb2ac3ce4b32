"""What `briefd check` asks the model server: is it reachable, which version, is the model pulled (an
OpenAI-compatible server: does it answer GET /v1/models, and does it serve the model).

Why apart from llm.py: the check talks to Ollama's plain HTTP API (`/api/version`, `/api/tags`), not through the
chat client, and answers a person with a message and a fix instead of raising; it shares only the 4xx rule
(AUTH_STATUSES, refusal_fix) and the transport's wording with the calls, and takes them from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from .llm import AUTH_STATUSES, refusal_fix, transport_reason
from .wire import listed_context, same_model

__all__ = ["ProbeResult", "base_url", "probe"]


@dataclass
class ProbeResult:
    """What `briefd check` says about Ollama."""

    host: str
    model: str
    reachable: bool
    version: str | None
    model_pulled: bool
    models: list[str]
    message: str
    fix: str | None = None

    @property
    def ok(self) -> bool:
        return self.reachable and self.model_pulled


def base_url(host: str) -> str:
    """The URL the ollama client will really use for `host` (OLLAMA_HOST semantics).

    Borrowed from the client so that `briefd check` probes the same place the calls go:
    note that "http://host" without a port means port 80 there, not 11434.
    """
    try:
        from ollama._client import _parse_host
    except ImportError:  # a future client moved it: the common cases by hand
        host = host or "127.0.0.1:11434"
        if "://" not in host:
            host = "http://" + host
        return host.rstrip("/")
    return _parse_host(host)


def _model_names(tags: Any) -> list[str]:
    entries = tags.get("models") if isinstance(tags, dict) else None
    names: list[str] = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict):
            for k in ("name", "model"):
                if isinstance(entry.get(k), str) and entry[k] not in names:
                    names.append(entry[k])
    return names


async def probe(host: str, model: str, timeout_s: float, api: str = "ollama", api_key: str | None = None) -> ProbeResult:
    """Is Ollama reachable at `host`, which version, and is `model` pulled? Says what to fix. With `api`
    "openai", `host` is an OpenAI-compatible server's base URL: `probe_openai`."""
    if api == "openai":
        return await probe_openai(host, model, timeout_s, api_key)
    url = base_url(host)
    start_fix = "start Ollama (`ollama serve`), or point OLLAMA_HOST / --ollama-host at it"
    try:
        async with httpx.AsyncClient(base_url=url, timeout=timeout_s) as http:
            resp = await http.get("/api/version")
            if resp.status_code in AUTH_STATUSES:  # Ollama or not, what stands at OLLAMA_HOST does not let briefd in
                return ProbeResult(url, model, False, None, False, [],
                                   f"the model server at {url} refuses briefd (GET /api/version gave "
                                   f"HTTP {resp.status_code})", refusal_fix(resp.status_code))
            if resp.status_code != 200:
                return ProbeResult(url, model, False, None, False, [],
                                   f"something answers at {url}, but not like Ollama "
                                   f"(GET /api/version gave HTTP {resp.status_code})", start_fix)
            try:
                version = resp.json().get("version")
            except (ValueError, AttributeError):
                version = None
            if not isinstance(version, str):
                return ProbeResult(url, model, False, None, False, [],
                                   f"something answers at {url}, but /api/version is not Ollama's", start_fix)
            tags_resp = await http.get("/api/tags")
            try:
                tags = tags_resp.json() if tags_resp.status_code == 200 else None
            except ValueError:
                tags = None
    except httpx.HTTPError as exc:
        return ProbeResult(url, model, False, None, False, [],
                           f"Ollama at {url} is unreachable: {transport_reason(exc)}", start_fix)
    if tags is None:
        return ProbeResult(url, model, True, version, False, [],
                           f"Ollama {version} at {url} did not list its models (GET /api/tags gave "
                           f"HTTP {tags_resp.status_code})", "check the Ollama server's log")
    names = _model_names(tags)
    if any(same_model(model, name) for name in names):
        return ProbeResult(url, model, True, version, True, names,
                           f"Ollama {version} at {url}; model {model!r} is pulled")
    listed = ", ".join(names) if names else "none"
    return ProbeResult(url, model, True, version, False, names,
                       f"Ollama {version} at {url} does not have model {model!r} (pulled: {listed})",
                       f"run: ollama pull {model}")


async def probe_openai(base: str, model: str, timeout_s: float, api_key: str | None = None) -> ProbeResult:
    """Does the OpenAI-compatible server at `base` answer GET /models, and does it serve `model`? Says what to
    fix: a server not running, a base URL without its /v1 (the server answers, /models is not there), a key
    refused, a model it does not serve (with the ones it does). `version` is None: the API has none."""
    url = base.rstrip("/")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    start_fix = ("start the server (vLLM: `vllm serve MODEL`; llama.cpp: `llama-server -m FILE`), or point "
                 "openai_base_url / BRIEFD_OPENAI_BASE_URL at it, with its /v1")
    try:
        async with httpx.AsyncClient(timeout=timeout_s, headers=headers) as http:
            resp = await http.get(url + "/models")
    except httpx.HTTPError as exc:
        return ProbeResult(url, model, False, None, False, [],
                           f"the model server at {url} is unreachable: {transport_reason(exc)}", start_fix)
    if resp.status_code in AUTH_STATUSES:
        said = "no API key was sent" if not api_key else "the API key was refused"
        return ProbeResult(url, model, False, None, False, [],
                           f"the model server at {url} refuses briefd (GET /models gave HTTP {resp.status_code}: "
                           f"{said})", refusal_fix(resp.status_code, "openai"))
    if resp.status_code == 404 and not url.endswith("/v1"):
        return ProbeResult(url, model, False, None, False, [],
                           f"something answers at {url}, but has no /models there (HTTP 404)",
                           f"add /v1 to the base URL: openai_base_url = \"{url}/v1\"")
    try:
        listed = resp.json() if resp.status_code == 200 else None
    except ValueError:
        listed = None
    entries = listed.get("data") if isinstance(listed, dict) else None
    if not isinstance(entries, list):
        return ProbeResult(url, model, False, None, False, [],
                           f"something answers at {url}, but GET /models gave HTTP {resp.status_code}, not an "
                           f"OpenAI-compatible model list", start_fix)
    names = [entry["id"] for entry in entries if isinstance(entry, dict) and isinstance(entry.get("id"), str)]
    context = listed_context(listed, model)
    if any(same_model(model, name) for name in names):
        told = f" (context {context} tokens)" if context else ""
        return ProbeResult(url, model, True, None, True, names,
                           f"OpenAI-compatible server at {url}; model {model!r} is served{told}")
    return ProbeResult(url, model, True, None, False, names,
                       f"the model server at {url} does not serve model {model!r} (it serves: "
                       f"{', '.join(names) or 'none'})",
                       "set `model` (BRIEFD_MODEL) to the name the server lists, exactly as listed")
