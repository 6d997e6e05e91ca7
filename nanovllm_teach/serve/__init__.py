"""An OpenAI-compatible server around one engine thread (``nanovllm-teach serve``), with vLLM's metric names
and a live view of the run.

- ``build.py``: ``build_server(model, trace=..., **settings)``, the whole server in one call;
- ``app.py``: the FastAPI routes, the limits, SSE streaming;
- ``http.py``: the HTTP edge: header, body and keep-alive timeouts, the body's bound, ``--api-key``;
- ``engine_thread.py``: the one thread that owns the engine, fed through a thread-safe queue;
- ``protocol.py``: the OpenAI request and response bodies; ``detokenize.py``: streamed text;
- ``limits.py``: the bounds on what a client may send;
- ``metrics.py``: Prometheus metrics under vLLM's names;
- ``live.py``: the replay page in live mode (``/live``), fed from the engine's recorder;
- ``loadgen.py``: a real ``openai`` client sending a workload as it arrives, measured into ``WorkloadResult``.

The ``serve`` command that starts it is ``nanovllm_teach/cli/serve.py``.

Needs the ``serve`` extra (fastapi, uvicorn, prometheus_client). Emits nothing itself.
"""
