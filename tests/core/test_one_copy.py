"""One copy of each rule (issue 20 #5) beyond the numbers (tests/rules/test_numbers.py): Settings the one
source of the fetch limits' and the model's defaults, carried by name; the version in one place; one
UTC timestamp; LoopState.numbers_discarded derived from the counts it sums."""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from briefd.daemon import __version__
from briefd.daemon.core.settings import Settings, config_knobs
from briefd.daemon.model import llm
from briefd.daemon.model.llm import ModelConfig
from briefd.daemon.model.hosts import model_config
from briefd.daemon.ops.worker import fetch_limits
from briefd.daemon.report import assemble, outbox
from briefd.daemon.rules.decide import LoopState
from briefd.daemon.sources.fetch import USER_AGENT, FetchLimits
from briefd.store import utc_now

ROOT = Path(__file__).resolve().parents[2]

# Which setting reaches which field: the whole table, so a knob lost (or a setting caught by accident) shows.
MODEL_KNOBS = {"model": "model", "num_ctx": "num_ctx", "num_predict": "num_predict", "timeout_s": "llm_timeout_s",
               "temperature": "temperature", "seed": "seed"}
FETCH_KNOBS = {"max_bytes": "fetch_max_bytes", "timeout_s": "fetch_timeout_s", "max_redirects": "fetch_max_redirects",
               "allow_link_local": "allow_link_local", "egress": "egress", "egress_hosts": "egress_hosts"}
CHANGED: dict[str, Any] = {
    "model": "gemma3:270m", "num_ctx": 16384, "num_predict": 512, "llm_timeout_s": 12.5, "temperature": 0.7,
    "seed": 7, "fetch_max_bytes": 123_456, "fetch_timeout_s": 3.5, "fetch_max_redirects": 2,
    "allow_link_local": True, "egress": "private", "egress_hosts": ("example.org",)}


@pytest.mark.parametrize("build, config, knobs", [(model_config, ModelConfig, MODEL_KNOBS),
                                                  (fetch_limits, FetchLimits, FETCH_KNOBS)])
def test_every_setting_reaches_its_config_and_the_defaults_are_settings(build: Any, config: type,
                                                                        knobs: dict[str, str]) -> None:
    changed = build(dataclasses.replace(Settings(), **CHANGED))
    assert {name: getattr(changed, name) for name in knobs} == {name: CHANGED[s] for name, s in knobs.items()}
    default = build(Settings())
    assert {name: getattr(default, name) for name in knobs} == {n: getattr(Settings(), s) for n, s in knobs.items()}
    fields = {f.name: f.default for f in dataclasses.fields(config)}
    assert {n: fields[n] for n in knobs if n != "model"} == {n: getattr(Settings(), s) for n, s in knobs.items()
                                                             if n != "model"}, "the config's defaults are Settings'"


@dataclass(frozen=True)
class _NewComponent:
    timeout_s: float = 1.0
    seed: int = 0
    not_a_setting: int = 3


def test_a_new_knob_is_carried_by_name() -> None:
    """A config field reaches its setting by name alone (`<prefix>field`, else `field`): no copy to edit."""
    settings = dataclasses.replace(Settings(), fetch_timeout_s=9.0, seed=5)
    assert config_knobs(settings, _NewComponent, "fetch_") == {"timeout_s": 9.0, "seed": 5}
    assert config_knobs(settings, _NewComponent, "llm_") == {"timeout_s": Settings.llm_timeout_s, "seed": 5}


def test_the_version_has_one_place() -> None:
    """pyproject reads daemon/__init__.py's __version__ (setuptools attr); the user agent says the same
    version (it said briefd/0.1 beside a 0.1.0 package)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "briefd.daemon.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    assert USER_AGENT.startswith(f"briefd/{__version__} ") and FetchLimits().user_agent == USER_AGENT


def test_one_utc_timestamp() -> None:
    """report.json and the model calls' records stamp time with the store's one helper, not copies."""
    assert not hasattr(outbox, "utc_now_iso") and not hasattr(llm, "_utc_now")
    assert vars(outbox)["utc_now"] is utc_now and vars(llm)["utc_now"] is utc_now
    assert vars(assemble)["utc_now"] is utc_now  # report.json's finished_at
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", utc_now())


def test_numbers_discarded_is_derived_and_the_checkpoint_keeps_its_shape() -> None:
    state = LoopState(figures_discarded={"not_in_quote": 2, "wrong_unit": 1})
    assert state.numbers_discarded == 3
    state.figures_discarded["not_in_quote"] += 1
    assert state.numbers_discarded == 4, "counted once, so the sum and its parts cannot disagree"
    saved: dict[str, Any] = json.loads(json.dumps(state.to_dict()))
    keys = list(saved)
    assert saved["numbers_discarded"] == 4 and keys.index("numbers_discarded") + 1 == keys.index("figures_discarded")
    assert LoopState.from_dict(saved) == state
    older = {**saved, "numbers_discarded": 99}  # a checkpoint that stored a count of its own
    assert LoopState.from_dict(older).numbers_discarded == 4
