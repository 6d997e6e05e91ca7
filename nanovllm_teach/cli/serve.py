"""Command line: ``serve``, the engine behind an OpenAI-compatible HTTP API.

    nanovllm-teach serve                       # the shipped model on http://127.0.0.1:8000
    nanovllm-teach serve --trace               # ... recording the run to out/serve_trace.jsonl
    nanovllm-teach serve MODEL_FOLDER --port 8001 --trace run.jsonl

It checks that the port is free, builds ``LLM(model, trace=...)`` with the engine settings given, the app
(``serve/app.py``) around it and runs it under uvicorn until Ctrl-C or SIGTERM (a drain: no new connection, the
requests under way given ``serve/limits.py``'s ``DRAIN_S`` seconds to finish, then aborted); the trace
(``--trace``) is then complete and replays like any other. ``/live`` shows the run as it happens
(``serve/live.py``). A mistake raises ValueError or UsageError (one line, exit status 2, from ``cli.main``), a
port another program holds among them: refused before the model loads, so that a client never waits on, or talks
to, a server that is not this one.

Nothing here imports torch, FastAPI or uvicorn until the server is built.
"""

from __future__ import annotations

import argparse
import signal
import socket
from typing import Any

from nanovllm_teach.cli.arguments import ENGINE_SETTINGS, MODEL_FOLDER_HELP, UsageError, writable_file
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.serve.limits import MAX_BODY_BYTES, MAX_WAITING, ServeLimits

DEFAULT_TRACE = "out/serve_trace.jsonl"  # where a bare --trace records: out/, which git ignores
PORT_TAKEN = Text(en="--port {port}: {host}:{port} cannot be listened on ({why}); another server may hold it: "
                     "choose another port",
                  zh="--port {port}：无法在 {host}:{port} 上监听（{why}）；可能有别的服务器占用了它：请换一个端口")
NO_SERVE_EXTRA = Text(en="nanovllm-teach serve needs the serve extra ({missing} is missing): pip install -e '.[serve]'",
                      zh="nanovllm-teach serve 需要 serve 这组依赖（缺少 {missing}）：pip install -e '.[serve]'")
BAD_PORT = Text(en="--port must be between 1 and 65535, got {port}", zh="--port 必须在 1 到 65535 之间，收到的是 {port}")
SERVING = Text(en="serving {model} on {url}", zh="正在 {url} 上提供 {model} 的服务")
WATCH_LIVE = Text(en=" (watch it live: {url})", zh="（实时查看：{url}）")
STOPPED = Text(en="stopped: the server drained and its engine core has exited",
               zh="已停止：服务器已排空请求，引擎核心进程已退出")
TRACE_WRITTEN = Text(en="trace: {path} (nanovllm-teach replay {path})",
                     zh="trace 已写入：{path}（用 nanovllm-teach replay {path} 回放）")


def add_serve_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``serve`` subcommand on ``subparsers`` (what ``add_subparsers`` returned)."""
    srv = subparsers.add_parser("serve", help=say(Text(en="serve a model over an OpenAI-compatible HTTP API",
                                                       zh="通过与 OpenAI 兼容的 HTTP API 提供模型服务")))
    srv.add_argument("model", nargs="?", default=None, help=say(MODEL_FOLDER_HELP))
    srv.add_argument("--host", default="127.0.0.1", help=say(Text(en="the address to listen on (default: 127.0.0.1)",
                                                                  zh="监听的地址（默认：127.0.0.1）")))
    srv.add_argument("--port", type=int, default=8000)
    srv.add_argument("--served-model-name", default=None, help=say(Text(
        en="the name clients ask for (default: the folder's)", zh="客户端请求时用的模型名（默认：文件夹名）")))
    srv.add_argument("--trace", nargs="?", const=DEFAULT_TRACE, default=None, metavar="FILE", help=say(Text(
        en="record the live run to this JSONL file (--trace alone: {path})",
        zh="把这次运行录制到这个 JSONL 文件（只写 --trace：{path}）"), path=DEFAULT_TRACE))
    srv.add_argument("--no-live", action="store_true", help=say(Text(en="do not serve the live page at /live",
                                                                     zh="不提供 /live 实时页面")))
    srv.add_argument("--max-waiting", type=int, default=MAX_WAITING, help=say(Text(
        en="sequences (n per prompt) beyond the running batch before 503 (default: {limit})",
        zh="正在运行的批次之外最多排队的序列数（每个 prompt 算 n 条），超过就返回 503（默认：{limit}）"), limit=MAX_WAITING))
    srv.add_argument("--max-body-bytes", type=int, default=MAX_BODY_BYTES)
    srv.add_argument("--api-key", default=None, help=say(Text(
        en="ask every /v1 request for 'Authorization: Bearer KEY', as vllm serve --api-key does (/live: or ?key=KEY)",
        zh="要求每个 /v1 请求带上 'Authorization: Bearer KEY'，和 vllm serve --api-key 一样（/live 也可以用 ?key=KEY）")))
    engine = srv.add_argument_group(say(ENGINE_SETTINGS))
    engine.add_argument("--max-model-len", type=int, default=4096)
    engine.add_argument("--max-num-seqs", type=int, default=512)
    engine.add_argument("--max-num-batched-tokens", type=int, default=None)
    engine.add_argument("--num-kvcache-blocks", type=int, default=None)
    engine.add_argument("--block-size", type=int, default=256)
    engine.add_argument("--no-prefix-caching", action="store_true")
    srv.set_defaults(func=_serve)
    return srv


def _serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from nanovllm_teach.serve.build import build_server
        from nanovllm_teach.serve.http import uvicorn_config
    except ModuleNotFoundError as error:
        raise ValueError(say(NO_SERVE_EXTRA, missing=error.name)) from None
    if args.trace:
        writable_file(args.trace, "--trace")
    if not 0 < args.port < 65536:
        raise ValueError(say(BAD_PORT, port=args.port))
    _check_port_is_free(args.host, args.port)
    settings = dict(max_model_len=args.max_model_len, max_num_seqs=args.max_num_seqs,
                    max_num_batched_tokens=args.max_num_batched_tokens, num_kvcache_blocks=args.num_kvcache_blocks,
                    kvcache_block_size=args.block_size, enable_prefix_caching=not args.no_prefix_caching)
    limits = ServeLimits(max_waiting=args.max_waiting, max_body_bytes=args.max_body_bytes)
    app = build_server(args.model, trace=args.trace, served_model_name=args.served_model_name, live=not args.no_live,
                       limits=limits, api_key=args.api_key, **settings)
    root = f"http://{args.host}:{args.port}"
    print(say(SERVING, model=app.state.server.model_name, url=f"{root}/v1")
          + ("" if args.no_live else say(WATCH_LIVE, url=f"{root}/live")), flush=True)
    # uvicorn drains on SIGINT or SIGTERM, then raises the signal again for the handler that was there before it:
    # Python's would end a clean stop in a KeyboardInterrupt traceback, the default one in death by SIGTERM
    # (status -15, the trace line unsaid). Set now, after the model has loaded, ours ends it as the stop it was.
    previous = {signum: signal.signal(signum, _drained) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        uvicorn.Server(uvicorn_config(app, args.host, args.port, limits)).run()
    except _Drained:
        pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    print(say(STOPPED))
    if args.trace:
        print(say(TRACE_WRITTEN, path=args.trace))
    return 0


class _Drained(Exception):
    """uvicorn has drained the server on a signal and passed the signal on."""


def _drained(signum: int, frame: Any) -> None:
    raise _Drained


def _check_port_is_free(host: str, port: int) -> None:
    """Bind ``host:port`` as uvicorn will, and let it go: a ``UsageError`` if another program holds it."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            # As uvicorn binds: a port left in TIME_WAIT by a server just stopped counts as free.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as error:
        raise UsageError(say(PORT_TAKEN, host=host, port=port, why=error.strerror or error)) from None
