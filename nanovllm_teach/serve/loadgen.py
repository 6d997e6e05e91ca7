"""Serving: a small load generator, a real OpenAI client sending a workload to a server as it arrives.

``send_workload(url, model, workload)`` sends each request of a workload (``workload/requests.py``: arrival
times, prompt token ids, output lengths) at its arrival time, streamed, through the official ``openai``
package, one thread per request in flight. Each answer is exactly ``output_len`` tokens long (``max_tokens``
and vLLM's ``ignore_eos``), as ``serve_workload`` runs a real model. It measures on the client's side what
a user sees, into the same ``WorkloadResult`` that ``run_workload`` fills (``workload/metrics.py``: one
definition of TTFT, TPOT and goodput): a request's arrival is when it was sent, its first token when the
first chunk with text arrived, its finish when the last chunk did. ``ClientRun.itl_s`` adds the inter-token
latencies: every gap between two consecutive text chunks of a request.

Emits no events.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Sequence

from nanovllm_teach.workload.metrics import RequestTimes, WorkloadResult
from nanovllm_teach.workload.requests import Request


@dataclass
class ClientRun:
    result: WorkloadResult
    itl_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def send_workload(url: str, model: str, workload: Sequence[Request], *, timeout_s: float = 600.0) -> ClientRun:
    """Send ``workload`` to the server at ``url`` (``http://HOST:PORT``) and measure it from the client."""
    import openai

    client = openai.OpenAI(base_url=url.rstrip("/") + "/v1", api_key="none", max_retries=0, timeout=timeout_s)
    run = ClientRun(WorkloadResult())
    lock = threading.Lock()
    start = time.perf_counter()

    def one(k: int, request: Request) -> None:
        time.sleep(max(0.0, start + request.arrival_s - time.perf_counter()))
        times = RequestTimes(time.perf_counter(), len(request.prompt_token_ids))
        gaps, last = [], None
        try:
            stream = client.completions.create(model=model, prompt=request.prompt_token_ids, temperature=0,
                                               max_tokens=request.output_len, stream=True,
                                               stream_options={"include_usage": True},
                                               extra_body={"ignore_eos": True})
            for chunk in stream:
                now = time.perf_counter()
                if chunk.usage is not None:
                    times.num_output_tokens = chunk.usage.completion_tokens
                if chunk.choices and chunk.choices[0].text:
                    if last is None:
                        times.first_token_s = now
                    else:
                        gaps.append(now - last)
                    last = now
                if chunk.choices and chunk.choices[0].finish_reason:
                    times.finish_s, times.finish_reason = now, chunk.choices[0].finish_reason
        except openai.OpenAIError as error:
            with lock:
                run.errors.append(f"request {k}: {error}")
        with lock:
            run.result.requests[k] = times
            run.itl_s.extend(gaps)

    threads = [threading.Thread(target=one, args=(k, r), daemon=True) for k, r in enumerate(workload)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout_s)
    finishes = [t.finish_s for t in run.result.requests.values() if t.finish_s is not None]
    run.result.duration_s = (max(finishes) - start - min(r.arrival_s for r in workload)) if finishes else 0.0
    return run
