"""The lab's real model runs on every x86-64 host: its weights stay out of ggml's extra (AMX) buffers.

On a CPU with AMX, llama-cpp-python 0.3.36 segfaulted in its first decode (ggml_backend_amx_mul_mat)
and `make demo`, `make lab`, `make bench-real` and every real-inference test failed with it (issue 19).
The llama driver loads the model with `use_extra_bufts = False` (lab.drivers.plain_cpu_buffers).
A machine without AMX never shows the crash, so these tests check that the parameter really reaches
llama.cpp's loader, that the model then generates, and that a binding without the field still loads.
"""

from __future__ import annotations

import ctypes
import sys
from types import SimpleNamespace
from typing import Any

import ollama
import pytest

from tests.conftest import OllamaLab
from lab.drivers import EXTRA_BUFTS_CRASH, InferenceRequest, LlamaDriver, Message, plain_cpu_buffers

llama_cpp = pytest.importorskip(
    "llama_cpp", reason="llama-cpp-python is the lab extra's: make test installs it, and these tests run there")
FEW_TOKENS = 6  # real inference on two busy cores: a handful of tokens is a second or two


def test_the_model_is_loaded_with_use_extra_bufts_off_and_generates(monkeypatch: pytest.MonkeyPatch) -> None:
    binding = llama_cpp.llama_cpp
    loader = binding.llama_model_load_from_file
    seen: list[bool] = []

    def spy(path: bytes, params: Any, /) -> Any:  # what llama.cpp's loader is handed, as it is handed
        seen.append(bool(params.use_extra_bufts))
        return loader(path, params)

    monkeypatch.setattr(binding, "llama_model_load_from_file", spy)
    driver = LlamaDriver()
    request = InferenceRequest(model=LlamaDriver.MODEL, messages=(Message("user", "The capital of France is"),),
                               format=None, num_ctx=512, num_predict=FEW_TOKENS, temperature=0.0, seed=1)
    driver.ensure_loaded(request.model, request.num_ctx)
    done = driver.complete(request)
    assert seen == [False], "llama.cpp's loader got use_extra_bufts on: the weights may go to the AMX buffers"
    assert driver.use_extra_bufts is False, "the loaded model's own parameters say so too"
    assert binding.llama_model_default_params().use_extra_bufts, "the default is put back after the load"
    assert 0 < done.completion_tokens <= FEW_TOKENS and done.text, "the model generates"


def _fake_binding(with_field: bool) -> Any:
    """A stand-in for llama_cpp.llama_cpp: a params struct with or without use_extra_bufts, and its default."""
    fields: list[tuple[str, Any]] = [("n_gpu_layers", ctypes.c_int32)]
    if with_field:
        fields.append(("use_extra_bufts", ctypes.c_bool))
    params_type = type("llama_model_params", (ctypes.Structure,), {"_fields_": fields})

    def default() -> Any:
        params = params_type()
        if with_field:
            params.use_extra_bufts = True  # llama.cpp's default
        return params

    return SimpleNamespace(llama_model_params=params_type, llama_model_default_params=default)


def test_a_binding_with_the_field_gets_it_off_inside_the_block_only() -> None:
    lib = _fake_binding(with_field=True)
    default = lib.llama_model_default_params
    warnings: list[str] = []
    with plain_cpu_buffers(lib, warnings.append) as plain:
        assert plain is True
        assert lib.llama_model_default_params().use_extra_bufts is False
    assert lib.llama_model_default_params is default and default().use_extra_bufts is True
    assert warnings == []


def test_a_binding_without_the_field_loads_as_it_is_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    lib = _fake_binding(with_field=False)
    default = lib.llama_model_default_params
    monkeypatch.setitem(sys.modules, "llama_cpp", SimpleNamespace(__version__="0.2.90"))
    warnings: list[str] = []
    with plain_cpu_buffers(lib, warnings.append) as plain:
        assert plain is False
        assert lib.llama_model_default_params is default, "nothing is wrapped: the load goes on as before"
    assert len(warnings) == 1
    said = warnings[0]
    assert "llama-cpp-python 0.2.90 has no model parameter use_extra_bufts" in said
    assert EXTRA_BUFTS_CRASH in said and "pyproject.toml's lab extra" in said, "it names the risk and the fix"


@pytest.mark.slow
def test_the_served_model_answers_a_few_tokens_with_plain_buffers(llama_ollama: OllamaLab) -> None:
    """Through the lab's Ollama-compatible server, as briefd, make demo and make bench-real use it."""
    client = ollama.Client(host=llama_ollama.url, timeout=120)
    answer = client.generate(model=LlamaDriver.MODEL, prompt="Bridges are inspected because",
                             options={"num_predict": FEW_TOKENS, "temperature": 0, "num_ctx": 2048})
    assert answer.eval_count and 0 < answer.eval_count <= FEW_TOKENS and answer.response
    assert llama_ollama.stats()["use_extra_bufts"] is False, "the server process loaded it with plain buffers"
