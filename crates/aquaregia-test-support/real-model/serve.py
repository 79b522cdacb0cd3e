"""Serves a GGUF model with llama.cpp's own HTTP server (xllamacpp) on 127.0.0.1, for tests.

Prints `READY <base url>` on stdout once `/health` answers 200, then serves until its stdin
closes (the test process that started it ended, however it ended) and exits.

Usage: serve.py --model PATH --template PATH [--alias NAME] [--threads N] [--ctx N]
                [--parallel N] [--cache-ram-mib N] [--n-predict N] [--temperature T]
                [--api-key KEY]
"""

import argparse
import os
import sys
import time
import urllib.error
import urllib.request

import xllamacpp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--template", required=True)
    parser.add_argument("--alias", default="smollm2")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--cache-ram-mib", type=int, default=64)
    # A cap on every answer: a small model can ramble until the context is full.
    parser.add_argument("--n-predict", type=int, default=192)
    # The default for requests that set none (`aquaregia run` has no temperature flag): a
    # greedy model answers alike run to run, and short.
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--api-key")
    parser.add_argument("--health-timeout", type=float, default=120.0)
    args = parser.parse_args()

    with open(args.template, encoding="utf-8") as file:
        template = file.read()

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # the OS picks a free port; listening_address tells which
    params.n_ctx = args.ctx
    params.n_parallel = args.parallel
    params.n_predict = args.n_predict
    params.sampling.temp = args.temperature
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    # ggml's worker threads otherwise spin polling for work (level 50): an idle server then
    # burns about 40% of a core, taken from the tests and builds sharing the machine.
    params.cpuparams.poll = 0
    params.cpuparams_batch.poll = 0
    params.use_jinja = True
    params.chat_template = template
    params.offline = True
    params.ui = False
    # Upstream keeps an 8 GiB prompt cache by default.
    params.cache_ram_mib = args.cache_ram_mib
    if args.api_key:
        params.api_keys = [args.api_key]

    server = xllamacpp.Server(params)
    base = server.listening_address.rstrip("/")
    wait_healthy(base, args.health_timeout)
    print(f"READY {base}", flush=True)

    # Serve until the parent closes our stdin: EOF arrives when it exits or is killed.
    while sys.stdin.buffer.read(4096):
        pass
    # The server's threads are not daemons; leave without waiting for them.
    os._exit(0)


def wait_healthy(base: str, timeout: float) -> None:
    """Polls /health until it answers 200 (it answers 503 while the model loads)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(base + "/health", timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            sys.exit(f"serve.py: {base}/health did not answer 200 within {timeout} s")
        time.sleep(0.05)


if __name__ == "__main__":
    main()
