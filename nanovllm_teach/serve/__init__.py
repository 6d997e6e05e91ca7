"""An OpenAI-compatible server (``nanovllm-teach serve``): an API process in front of an engine-core process,
as vLLM v1 runs them, with vLLM's metric names and a live view of the run.

- ``build.py``: ``build_server(model, trace=..., **settings)``, the whole server in one call;
- ``app.py``: the FastAPI routes, the limits, SSE streaming;
- ``http.py``: the HTTP edge: header, body and keep-alive timeouts, the body's bound, ``--api-key``;
- ``engine_core.py``: the engine-core process, which owns the engine and steps it;
- ``core_client.py``: the API process's side of it (starting it, ZMQ, its outputs to each response);
- ``messages.py``: the msgspec records the two processes send each other;
- ``protocol.py``: the OpenAI request and response bodies; ``detokenize.py``: streamed text;
- ``limits.py``: the bounds on what a client may send;
- ``metrics.py``: Prometheus metrics under vLLM's names;
- ``live.py``: the replay page in live mode (``/live``), fed from the engine's recorder;
- ``loadgen.py``: a real ``openai`` client sending a workload as it arrives, measured into ``WorkloadResult``.

The ``serve`` command that starts it is ``nanovllm_teach/cli/serve.py``.

Needs the ``serve`` extra (fastapi, uvicorn, prometheus_client). Emits nothing itself.
"""
