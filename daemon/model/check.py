"""What `briefd check` asks the model server: is it reachable, which version, is the model pulled.

Why apart from llm.py: the check talks to Ollama's plain HTTP API (`/api/version`, `/api/tags`), not through the
chat client, and answers a person with a message and a fix instead of raising; it shares only the 4xx rule
(AUTH_STATUSES, refusal_fix) and the transport's wording with the calls, and takes them from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from .llm import AUTH_STATUSES, refusal_fix, transport_reason

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


def _same_model(wanted: str, listed: str) -> bool:
    def norm(name: str) -> str:
        return name if ":" in name.rsplit("/", 1)[-1] else name + ":latest"
    return norm(wanted) == norm(listed)


async def probe(host: str, model: str, timeout_s: float) -> ProbeResult:
    """Is Ollama reachable at `host`, which version, and is `model` pulled? Says what to fix."""
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
    if any(_same_model(model, name) for name in names):
        return ProbeResult(url, model, True, version, True, names,
                           f"Ollama {version} at {url}; model {model!r} is pulled")
    listed = ", ".join(names) if names else "none"
    return ProbeResult(url, model, True, version, False, names,
                       f"Ollama {version} at {url} does not have model {model!r} (pulled: {listed})",
                       f"run: ollama pull {model}")
