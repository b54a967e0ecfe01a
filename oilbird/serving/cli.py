"""The vLLM commands of ``python -m oilbird``: ``serve-bench`` (:mod:`.serve_bench`) and ``serve``
(:mod:`.serve`). Their options and handlers; :mod:`oilbird.__main__` adds them to its parser."""
from __future__ import annotations

import argparse
import json

from ..cli_options import (at_least, common_options, force_option, fresh_out, list_of, model_options,
                           out_path)
from ..evaluation.runs import Run


def _engine_options(p: argparse.ArgumentParser) -> None:
    """What both commands tell vLLM's engine: the proposer's chain and options, the KV cache, dtype
    and compilation."""
    p.add_argument("--num-spec-tokens", type=at_least(1), default=8, help="vLLM's num_speculative_tokens (default 8)")
    p.add_argument("--oilbird-config", default=None,
                   help='JSON options of the Oilbird proposer, e.g. \'{"budget": 16, "sources": ["suffix", "pld"]}\'')
    p.add_argument("--kv-cache-gb", type=at_least(1), default=None,
                   help="VLLM_CPU_KVCACHE_SPACE, vLLM's KV cache on CPU in GB (given: it wins over the "
                        "variable; else the variable, else 1)")
    p.add_argument("--dtype", default="float32",
                   help="float32 (default: in bfloat16 a near-tie can flip between a one-token and a several-token "
                        "verify, so an output may differ from no speculation's), bfloat16, float16 or auto (vLLM's "
                        "choice)")
    p.add_argument("--compile", action="store_true",
                   help="let vLLM compile the model instead of running it eagerly; the Oilbird proposer's key "
                        "then reads the last layer (its layer hook does not fire in a compiled graph; said, "
                        "and counted as key_layer_missed)")


def _proposer_config(args) -> dict | None:
    """``--oilbird-config`` parsed (``{}`` too: the defaults, over a configuration in the
    environment), or a one-line refusal naming the option (before any engine)."""
    if args.oilbird_config is None:
        return None
    from .vllm import ProposerConfig
    ProposerConfig.from_json(args.oilbird_config, "--oilbird-config")
    return json.loads(args.oilbird_config)


def add_serving_commands(sub) -> None:
    p = sub.add_parser("serve-bench", help="the workload through vLLM: no speculation, ngram, suffix, oilbird "
                                           "(needs the vLLM environment: scripts/setup_vllm_env.sh)",
                       description="Serve one workload through vLLM once per method (each engine in the vLLM "
                                   "environment's python), check every output against no speculation, and print "
                                   "tokens/s and tokens per engine step per batch size (docs/serving.md).")
    common_options(p, default_max=64, state_layer=False, default_limit=16)
    p.add_argument("--methods", default=None,
                   help="comma-separated: nospec (always run: the reference), ngram, suffix, oilbird (default: all "
                        "four; suffix left out, with a note, where the vLLM environment lacks arctic-inference)")
    p.add_argument("--batch-sizes", type=list_of(at_least(1)), default=[1, 8],
                   help="comma-separated concurrent requests per pass (default 1,8)")
    _engine_options(p)
    p.add_argument("--prefix-caching", action="store_true",
                   help="turn vLLM's prefix caching on (cleared before each pass; off by default)")
    p.add_argument("--temperature", default="0",
                   help="vLLM's sampling temperature (0 = greedy, checked token for token); above 0 every "
                        "proposer's drafts go through vLLM's rejection sampler and only acceptance and speed are reported")
    p.add_argument("--out", type=out_path, default=None,
                   help="the folder to write (default: a new runs/serve-bench-DATA-TIME-PID)")
    force_option(p)

    p = sub.add_parser("serve", help="vLLM's OpenAI-compatible server with Oilbird's proposer (needs the vLLM "
                                     "environment: scripts/setup_vllm_env.sh)",
                       description="Start vLLM's OpenAI-compatible server in the vLLM environment with Oilbird's "
                                   "proposer drafting (docs/serving.md). Arguments after -- go to vLLM as they are.")
    model_options(p, state_layer=False)
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=at_least(1), default=8000, help="the port (default 8000)")
    p.add_argument("--served-model-name", default=None,
                   help="the name clients give as \"model\" (default: the model's: SmolLM2-135M-Instruct, a .gguf's "
                        "stem or a folder's name)")
    _engine_options(p)
    p.add_argument("--no-spec", action="store_true",
                   help="serve without speculation: the reference to compare a client's outputs with")
    p.add_argument("vllm_args", nargs=argparse.REMAINDER,
                   help="-- then vLLM's own server options (not those set here: --model, --port, ...)")


def serve_bench(args) -> int:
    from .serve_bench import (check_dtype, check_methods, check_temperature, default_methods, format_serve_table,
                              run_serve_bench, vllm_python)
    methods = None if args.methods is None else check_methods(args.methods)
    temperature = check_temperature(args.temperature)                       # before any engine starts
    check_dtype(args.dtype)
    cfg = _proposer_config(args)
    run = Run(args.out or fresh_out("serve-bench", args.data), args.force, ("results.json",), unit="methods")
    run.check()
    note = ""
    if methods is None:                         # (asks the vLLM environment: after the flags are checked)
        methods, note = default_methods(vllm_python())
    res = run_serve_bench(args.data, methods, args.limit, args.max_new_tokens, args.batch_sizes, run.out,
                          k=args.num_spec_tokens, model=args.model, skip=args.skip,
                          kv_cache_gb=args.kv_cache_gb, oilbird_config=cfg, temperature=temperature,
                          dtype=args.dtype, prefix_caching=args.prefix_caching, compile=args.compile)
    if note:
        res["note"] = note                      # report of the results.json says it too
    with run.recording(len(methods)):          # atomic; --force replaces the earlier run's results here
        run.write_json("results.json", res)
    print(format_serve_table(res))
    print(f"wrote {run.path('results.json')}")
    return 0 if res["lossless"] or res["lossless"] is None else 1


def serve(args) -> int:
    from .serve import run_server
    cfg = _proposer_config(args)
    return run_server(args.model, args.host, args.port, args.num_spec_tokens, cfg, args.dtype, args.compile,
                      not args.no_spec, args.kv_cache_gb, args.vllm_args, args.served_model_name)
