"""Requests that arrive in time, served by the real or the simulated engine, and what serving them measures.

- ``requests``: who arrives when, with how long a prompt, wanting how many tokens (``make_workload``);
- ``arrivals``: ``serve_workload``, the one arrival loop, on the engine's public step API;
- ``metrics``: TTFT, TPOT, throughput and goodput against an ``Slo`` (``WorkloadResult``).
"""
