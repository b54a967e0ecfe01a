"""``python -m oilbird serve-bench``: one workload through vLLM without speculation, with vLLM's
``ngram`` and ``suffix`` proposers and with Oilbird's (:mod:`oilbird.serving.vllm`).

vLLM pins ``transformers<5.20`` and this project ``>=5.20``, so vLLM lives in its own virtual
environment (``scripts/setup_vllm_env.sh``). This module runs in both:

* in the project's environment, :func:`run_serve_bench` encodes the prompts (the project's
  tokenizer and chat template), finds a plain HF model directory (:func:`oilbird.model.hf_model_dir`)
  and starts one engine process per method with the vLLM environment's python
  (``$OILBIRD_VLLM_PYTHON``, default :data:`DEFAULT_VLLM_PYTHON`), with this checkout on its path;
* in that process (``python -m oilbird.serving.serve_bench --engine ...``, an internal entry point),
  :func:`engine_run` starts ``vllm.LLM`` once and serves the requests once per batch size: at
  batch 1 one request after another, at batch B all of them with at most B running at once.
  Before each pass every cross-request memory is cleared (Oilbird's store, vLLM's suffix
  cache, the prefix cache where ``--prefix-caching`` turned it on), so each pass sees the
  requests fresh and in the same order.

Reported per method and batch size (``results.json``): output tokens/s over the pass's wall
time (prefill included), speedup over no speculation, tokens per engine step (output tokens /
the engine's steps, as vLLM counts its iterations: what speculation saves, independent of the
machine's load; at batch 1 one step serves one request, at batch B up to B), the older
per-request estimate from vLLM's acceptance counter (output tokens / (output tokens - accepted
drafts); it also counts drafts accepted past a request's ``max_tokens``, which the engine
verified and then dropped: docs/serving.md, "Counting engine steps"), vLLM's own acceptance counters (drafts,
draft tokens, accepted tokens, accepted per position; mean acceptance length = 1 + accepted /
drafts, as vLLM logs it), whether every output equals the no-speculation engine's, and for
Oilbird its drafting time per engine step and failure count. Nothing here imports vLLM at
module level.

``temperature`` > 0 (``--temperature``) samples: it goes to vLLM's ``SamplingParams`` (seed 0
per request), and every proposer's drafts, Oilbird's chains as much as ``ngram``'s and
``suffix``'s, then go through vLLM's own rejection sampler. Sampled outputs cannot be compared
token for token (with no speculation or with each other), so a sampled run reports acceptance
and speed only: ``lossless`` is null, never true.
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ..evaluation.runs import unique

METHODS = ("nospec", "ngram", "suffix", "oilbird")
DEFAULT_VLLM_PYTHON = "~/.venvs/oilbird-vllm/bin/python"
PROPOSER = "oilbird.serving.vllm.OilbirdProposer"
DTYPES = ("float32", "bfloat16", "float16", "auto")
# The engines' settings unless a run names others (``--dtype``, ``--prefix-caching``, ``--compile``).
# float32: in bfloat16 a near-tie can flip between a one-token and a several-token verify, and an
# output then differs from no speculation's (docs/serving.md, "Lossless, precisely"); eager: the
# Oilbird proposer's key reads a layer hook that does not fire inside a compiled graph (it falls back
# to the last layer, and says so); no prefix caching: no pass reuses another's prompt cache.
ENGINE_DEFAULTS = {"dtype": "float32", "prefix_caching": False, "compile": False}
ROOT = Path(__file__).resolve().parents[2]     # the checkout: the folder that holds the oilbird package


class ServeBenchError(RuntimeError):
    """An engine that cannot start or a run that cannot be measured; the message says why."""


def vllm_python() -> str:
    """The vLLM environment's python: ``$OILBIRD_VLLM_PYTHON``, else :data:`DEFAULT_VLLM_PYTHON`."""
    return str(Path(os.environ.get("OILBIRD_VLLM_PYTHON") or DEFAULT_VLLM_PYTHON).expanduser())


def check_methods(methods) -> list[str]:
    methods = [m.strip() for m in (methods.split(",") if isinstance(methods, str) else methods) if m.strip()]
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise ValueError(f"serve-bench method {bad[0] if bad else '(none)'!r}: choose from {', '.join(METHODS)}")
    unique(methods, "--methods")
    return ["nospec"] + [m for m in methods if m != "nospec"]      # the reference always runs


# -- in the project's environment -----------------------------------------------------------
def prepare(data: str, limit: int | None, max_new_tokens: int, out, model=None, skip: int = 0) -> Path:
    """Encode the requests and write ``out/spec.json`` for the engine processes; return its path."""
    from transformers import AutoTokenizer

    from ..model import hf_model_dir
    from ..data.requests import encode, load_requests
    from ..errors import ContextError
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, not {max_new_tokens}")
    out = Path(out).resolve()      # the engines run in ROOT: every path they get is absolute
    requests = load_requests(data, limit=limit, skip=skip)
    mdir = hf_model_dir(model)
    tok = AutoTokenizer.from_pretrained(str(mdir), local_files_only=True)
    context = int(json.loads((mdir / "config.json").read_text()).get("max_position_embeddings") or 0)
    prompts = []
    for r in requests:
        ids = encode(tok, r)                   # names the request when it holds no text
        if context and len(ids) + max_new_tokens > context:
            raise ContextError(f"request '{r.id}': the prompt has {len(ids)} tokens; with max_new_tokens="
                              f"{max_new_tokens} it exceeds the model's context of {context} tokens")
        prompts.append({"id": r.id, "ids": ids})
    out.mkdir(parents=True, exist_ok=True)
    spec = {"model": str(mdir), "data": str(data), "max_new_tokens": int(max_new_tokens), "prompts": prompts}
    (out / "spec.json").write_text(json.dumps(spec))
    return out / "spec.json"


def engine_env(kv_cache_gb: int | None = None, oilbird_config: dict | None = None,
               proposer: bool = True) -> dict:
    """The environment of an engine process: this checkout first on the path; the CPU KV cache
    (``kv_cache_gb`` wins over ``VLLM_CPU_KVCACHE_SPACE``, which else stays, else 1 GB); the
    Oilbird proposer's options (``oilbird_config`` wins over an ``OILBIRD_VLLM_CONFIG`` already
    set; with ``proposer``, that one is checked too, so a bad one is refused before any engine
    starts)."""
    from .vllm import CONFIG_ENV, ProposerConfig
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if kv_cache_gb is not None:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(int(kv_cache_gb))
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    if oilbird_config is not None:
        ProposerConfig.from_json(json.dumps(oilbird_config), "--oilbird-config")
        env[CONFIG_ENV] = json.dumps(oilbird_config)
    elif proposer and env.get(CONFIG_ENV):
        ProposerConfig.from_json(env[CONFIG_ENV], "$" + CONFIG_ENV)
    return env


@functools.lru_cache(maxsize=8)
def has_arctic(py: str) -> bool:
    """Can the vLLM environment ``py`` run vLLM's ``suffix`` method (arctic-inference, which
    scripts/setup_vllm_env.sh installs where its C++ build succeeds)? Asked once per process
    (choosing the default methods and checking the environment both ask)."""
    try:
        return subprocess.run([py, "-c", "import arctic_inference.suffix_decoding"],
                              capture_output=True, timeout=300).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def default_methods(py: str) -> tuple[list[str], str]:
    """``serve-bench``'s methods when none are named: every one of :data:`METHODS`, without
    ``suffix`` where the vLLM environment lacks arctic-inference (its install is optional: a
    first run failed on it); and the note that says so ("" when nothing was left out)."""
    if has_arctic(py):
        return list(METHODS), ""
    return [m for m in METHODS if m != "suffix"], ("suffix left out: the vLLM environment has no arctic-inference "
                                                   "(scripts/setup_vllm_env.sh installs it where its C++ build works)")


def check_python(py: str, methods=()) -> None:
    """ServeBenchError naming what is missing if ``py`` cannot run the engines ``methods`` need."""
    if not Path(py).is_file():
        default = Path(DEFAULT_VLLM_PYTHON).expanduser()
        how = ("`scripts/setup_vllm_env.sh`" if Path(py) == default else
               "`scripts/setup_vllm_env.sh DIR` with $OILBIRD_VLLM_PYTHON at DIR/bin/python")
        raise ServeBenchError(f"no vLLM environment at {py}: make it with {how}")
    try:
        res = subprocess.run([py, "-c", "import vllm, faiss, numpy"], capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise ServeBenchError(f"the vLLM environment {py} did not import vllm in 10 minutes (a loaded machine?)") from None
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["?"])[-1]
        raise ServeBenchError(f"the vLLM environment {py} cannot import vllm/faiss: {last} "
                              f"(rerun scripts/setup_vllm_env.sh)")
    if "suffix" in methods and not has_arctic(py):
        raise ServeBenchError(f"method 'suffix' needs arctic-inference in the vLLM environment {py}: rerun "
                              f"scripts/setup_vllm_env.sh (see its note on the C++ build), or leave 'suffix' out")


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run_serve_bench(data: str = "builtin", methods=METHODS, limit: int | None = 16, max_new_tokens: int = 64,
                    batch_sizes=(1, 8), out="runs/serve-bench", k: int = 8, model=None, skip: int = 0,
                    python: str | None = None, kv_cache_gb: int | None = None, dtype: str = "float32",
                    oilbird_config: dict | None = None, timeout_s: int = 3600, temperature: float = 0.0,
                    prefix_caching: bool = False, compile: bool = False) -> dict:
    """Serve the workload through vLLM once per method (one engine each) and return the results
    (the caller writes them: ``serve-bench`` as ``out/results.json``). ``out`` holds each engine's
    job, log and raw output (``engine-METHOD.json``; an earlier run's is removed before its engine
    starts, so a failed engine is never read from a stale file). See the module docstring; ``dtype``,
    ``prefix_caching`` and ``compile`` are the engines' settings (:data:`ENGINE_DEFAULTS`)."""
    methods = check_methods(methods)
    temperature = check_temperature(temperature)
    dtype = check_dtype(dtype)
    batch_sizes = sorted({int(b) for b in batch_sizes})
    if not batch_sizes or batch_sizes[0] < 1:
        raise ValueError("batch sizes must be >= 1")
    env = engine_env(kv_cache_gb, oilbird_config, "oilbird" in methods)    # a bad config: refused before any engine
    out = Path(out).resolve()      # the engines run in ROOT: every path they get is absolute
    py = python or vllm_python()
    check_python(py, methods)
    spec_path = prepare(data, limit, max_new_tokens, out, model, skip)
    spec = json.loads(spec_path.read_text())
    runs = {}
    for m in methods:
        job = {"method": m, "k": k, "batch_sizes": batch_sizes, "dtype": dtype, "temperature": temperature,
               "prefix_caching": bool(prefix_caching), "compile": bool(compile)}
        (out / f"job-{m}.json").write_text(json.dumps(job))
        (out / f"engine-{m}.json").unlink(missing_ok=True)
        log = out / f"engine-{m}.log"
        load0 = _load()
        print(f"[serve-bench] {m}: starting an engine (1-3 min on CPU), log {log}", file=sys.stderr, flush=True)
        with open(log, "w") as fh:
            rc = subprocess.run([py, "-m", "oilbird.serving.serve_bench", "--engine", str(spec_path),
                                 str(out / f"job-{m}.json"), str(out / f"engine-{m}.json")],
                                env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout_s, cwd=ROOT).returncode
        if rc != 0 or not (out / f"engine-{m}.json").is_file():
            tail = log.read_text(errors="replace").strip().splitlines()[-15:]
            raise ServeBenchError(f"the {m} engine failed (exit {rc}); last lines of {log}:\n" + "\n".join(tail))
        runs[m] = json.loads((out / f"engine-{m}.json").read_text())
        runs[m]["load_before"], runs[m]["load_after"] = load0, _load()
        print(f"[serve-bench] {m}: done, load {load0} -> {runs[m]['load_after']}", file=sys.stderr, flush=True)
    return summarize(runs, spec, k, temperature)


def check_dtype(dtype: str) -> str:
    """``dtype`` if vLLM takes it (:data:`DTYPES`), else ValueError (one line)."""
    if dtype not in DTYPES:
        raise ValueError(f"--dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    return dtype


def check_temperature(temperature) -> float:
    """``temperature`` as a finite float >= 0, else ValueError (one line)."""
    try:
        t = float(temperature)
    except (TypeError, ValueError):
        raise ValueError(f"--temperature must be a number >= 0, not {temperature!r}") from None
    if not 0 <= t < float("inf"):
        raise ValueError(f"--temperature must be a number >= 0 (0 = greedy), not {temperature!r}")
    return t


SAMPLED_NOTE = ("sampled: every proposer's drafts go through vLLM's own rejection sampler; outputs cannot be "
                "compared token for token, so acceptance and speed are reported, not losslessness")


def summarize(runs: dict, spec: dict, k: int, temperature: float = 0.0) -> dict:
    """Per method and batch size: tokens/s, speedup over nospec, acceptance, lossless (greedy
    only: null when sampled)."""
    ref = runs["nospec"]["passes"]
    table: dict = {}
    for m, r in runs.items():
        for b, p in r["passes"].items():
            base = ref[b]
            diff = [rid for rid, toks in p["outputs"].items() if toks != base["outputs"].get(rid)]
            acc = p.get("spec") or {}
            est = p["tokens"] / max(1, p["tokens"] - acc.get("accepted_tokens", 0))
            row = {"tokens_per_s": p["tokens_per_s"], "seconds": p["seconds"], "tokens": p["tokens"],
                   "speedup": p["tokens_per_s"] / base["tokens_per_s"] if base["tokens_per_s"] else None,
                   "lossless": not diff, "differing_requests": diff,
                   "mean_acceptance_length": (1 + acc["accepted_tokens"] / acc["drafts"]) if acc.get("drafts") else None,
                   # tokens per engine step, the engine's own step count (where vLLM kept none:
                   # the estimate below, and steps_counted says so)
                   "tokens_per_step": p["tokens"] / p["engine_steps"] if p.get("engine_steps") else est,
                   "steps_counted": bool(p.get("engine_steps")),
                   # every step commits its accepted drafts + 1, but vLLM's counter also counts the
                   # drafts accepted past a request's max_tokens (verified, then dropped)
                   "tokens_per_step_est": est, "engine_steps": p.get("engine_steps"),
                   "spec": acc, "load_before": r["load_before"], "load_after": r["load_after"]}
            if temperature > 0:          # not comparable token for token: never "lossless"
                row["lossless"], row["differing_requests"] = None, None
            if p.get("proposer"):
                pr = p["proposer"]
                row.update(draft_share_of_step=pr.get("draft_share_of_step"),
                           draft_ms_per_step=pr.get("draft_ms_per_step"),
                           proposer_failures=pr.get("failures"), proposer=pr)
            table.setdefault(b, {})[m] = row
    res = {"batch_sizes": table, "model": spec["model"], "data": spec["data"], "n_requests": len(spec["prompts"]),
           "max_new_tokens": spec["max_new_tokens"], "num_speculative_tokens": k,
           "lossless": all(row["lossless"] for rows in table.values() for row in rows.values()),
           "engine": {m: r.get("engine", {}) for m, r in runs.items()}}
    if temperature > 0:
        res.update(lossless=None, temperature=temperature, sampled=SAMPLED_NOTE)
    return res


def format_serve_table(res: dict) -> str:
    """The table serve-bench prints (and ``report`` of its results.json), under a line saying
    what was served: the model (its own outputs), the workload, and the engine's draft size."""
    rows = ["| batch | method | tokens/s | speedup | tokens/step | (est.) | mean acc. len | accepted / drafted "
            "| draft % of step | failures | lossless |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    if res.get("model") and res.get("data"):
        model, data = Path(str(res["model"])).name, Path(str(res["data"])).name      # no path of this machine
        rows.insert(0, f"{model} serving its own outputs of --data {data}: "
                       f"{res.get('n_requests', '?')} requests, up to {res.get('max_new_tokens', '?')} new tokens, "
                       f"{res.get('num_speculative_tokens', '?')} speculative tokens per step\n")
    for b, methods in res["batch_sizes"].items():
        for m, r in methods.items():
            s = r.get("spec") or {}
            mal = f"{r['mean_acceptance_length']:.2f}" if r.get("mean_acceptance_length") else "-"
            acc = f"{s['accepted_tokens']} / {s['draft_tokens']}" if s.get("draft_tokens") else "-"
            share = f"{100 * r['draft_share_of_step']:.1f}" if r.get("draft_share_of_step") is not None else "-"
            fails = str(r["proposer_failures"]) if r.get("proposer_failures") is not None else "-"
            est = f"{r['tokens_per_step_est']:.2f}" if r.get("tokens_per_step_est") else "-"
            tps = f"{r['tokens_per_step']:.2f}" + ("" if r.get("steps_counted", True) else " (est.)")
            rows.append(f"| {b} | {m} | {r['tokens_per_s']:.2f} | {r['speedup']:.2f}x | {tps} | "
                        f"{est} | {mal} | {acc} | {share} | "
                        f"{fails} | {'sampled' if r['lossless'] is None else 'yes' if r['lossless'] else 'NO'} |")
    rows.append("\ntokens/step: output tokens / engine steps (vLLM's iteration count; at batch B a step serves up "
                "to B requests); (est.): per request, output tokens / (output tokens - accepted drafts), which "
                "also counts what a last step committed past max_tokens")
    if res.get("sampled"):
        rows.append(f"\ntemperature {res['temperature']:g}: {res['sampled']}")
    said = {engine_settings(e) for e in (res.get("engine") or {}).values() if e}
    if said:
        rows.append("\nengines: " + "; ".join(sorted(said)))
    if res.get("note"):
        rows.append(f"note: {res['note']}")
    return "\n".join(rows)


def engine_settings(engine: dict) -> str:
    """An engine's settings in words (its ``results.json`` entry; a run before the settings were
    options recorded ``enforce_eager`` instead of ``compile``)."""
    e = {**ENGINE_DEFAULTS, **engine}
    compiled = e["compile"] if "enforce_eager" not in engine else not engine["enforce_eager"]
    return (f"{e['dtype']}, {'compiled' if compiled else 'eager'}, "
            f"prefix caching {'on' if e['prefix_caching'] else 'off'}")


# -- inside the vLLM environment ------------------------------------------------------------
def _drafter(worker):
    return getattr(getattr(worker, "model_runner", None), "drafter", None)


def _reset_drafter(worker) -> str:
    """Clear a proposer's cross-request memory (run in the worker via collective_rpc)."""
    d = _drafter(worker)
    if d is None:
        return "none"
    if hasattr(d, "reset") and hasattr(d, "core"):
        d.reset()
        return "oilbird"
    if hasattr(d, "suffix_cache"):
        from arctic_inference.suffix_decoding import SuffixDecodingCache
        cfg = worker.vllm_config.speculative_config
        d.suffix_cache = SuffixDecodingCache(max_tree_depth=cfg.suffix_decoding_max_tree_depth,
                                             max_cached_requests=cfg.suffix_decoding_max_cached_requests)
        return "suffix"
    return type(d).__name__


def _proposer_stats(worker):
    d = _drafter(worker)
    return d.stats() if d is not None and hasattr(d, "core") else None


def _set_enabled(worker, on: bool) -> bool:
    d = _drafter(worker)
    if d is None or not hasattr(d, "core"):
        return False
    d.enabled = bool(on)
    return True


def _engine_steps(llm) -> int | None:
    """The engine's steps so far: how many iterations vLLM observed in its per-step token
    histogram (every forward: a prefill chunk or a decode step; None if the metric is absent)."""
    counts = [m.count for m in llm.get_metrics() if m.name == "vllm:iteration_tokens_total" and hasattr(m, "count")]
    return sum(counts) if counts else None


def _spec_counters(llm) -> dict:
    out = {"drafts": 0, "draft_tokens": 0, "accepted_tokens": 0, "accepted_per_pos": []}
    names = {"vllm:spec_decode_num_drafts": "drafts", "vllm:spec_decode_num_draft_tokens": "draft_tokens",
             "vllm:spec_decode_num_accepted_tokens": "accepted_tokens"}
    for m in llm.get_metrics():
        if m.name in names:
            out[names[m.name]] += int(m.value)
        elif m.name == "vllm:spec_decode_num_accepted_tokens_per_pos":
            out["accepted_per_pos"] = [int(v) for v in m.values]
    return out


def _delta(after: dict, before: dict) -> dict:
    d = {k: after[k] - before[k] for k in ("drafts", "draft_tokens", "accepted_tokens")}
    pb = before["accepted_per_pos"] or [0] * len(after["accepted_per_pos"])
    d["accepted_per_pos"] = [a - b for a, b in zip(after["accepted_per_pos"], pb)]
    return d


def engine_kwargs(spec: dict, job: dict) -> dict:
    """``vllm.LLM``'s arguments for one method's engine (pure: the job's engine settings, with
    :data:`ENGINE_DEFAULTS` for those it does not name)."""
    method, k, e = job["method"], int(job["k"]), {**ENGINE_DEFAULTS, **job}
    longest = max(len(p["ids"]) for p in spec["prompts"])
    kw = dict(model=spec["model"], enforce_eager=not e["compile"], max_num_seqs=max(job["batch_sizes"]), seed=0,
              max_model_len=longest + spec["max_new_tokens"] + k + 16, enable_prefix_caching=e["prefix_caching"],
              disable_log_stats=False, dtype=e["dtype"])
    if method == "ngram":
        kw["speculative_config"] = {"method": "ngram", "num_speculative_tokens": k,
                                    "prompt_lookup_max": 4, "prompt_lookup_min": 1}
    elif method == "suffix":
        kw["speculative_config"] = {"method": "suffix", "num_speculative_tokens": k}
    elif method == "oilbird":
        kw["speculative_config"] = {"method": "custom_class", "model": PROPOSER, "num_speculative_tokens": k}
    return kw


def _make_llm(spec: dict, job: dict):
    os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"     # collective_rpc with the functions above
    from vllm import LLM
    return LLM(**engine_kwargs(spec, job))


def sampling_kwargs(max_new: int, temperature: float = 0.0) -> dict:
    """vLLM ``SamplingParams`` arguments: greedy at 0, else the temperature with a fixed seed."""
    kw = {"temperature": float(temperature), "max_tokens": max_new, "ignore_eos": False}
    if temperature > 0:
        kw["seed"] = 0
    return kw


def _serve(llm, prompts: list[dict], max_new: int, batch: int, temperature: float = 0.0) -> tuple[dict, float]:
    from vllm import SamplingParams
    sp = SamplingParams(**sampling_kwargs(max_new, temperature))
    outputs: dict = {}
    t0 = time.perf_counter()
    if batch == 1:
        for p in prompts:
            o = llm.generate([{"prompt_token_ids": p["ids"]}], sp, use_tqdm=False)[0]
            outputs[p["id"]] = list(o.outputs[0].token_ids)
    else:
        res = llm.generate([{"prompt_token_ids": p["ids"]} for p in prompts], sp, use_tqdm=False)
        for p, o in zip(prompts, res):
            outputs[p["id"]] = list(o.outputs[0].token_ids)
    return outputs, time.perf_counter() - t0


def engine_run(spec_path, job_path, result_path) -> None:
    """One method's engine: every batch size in turn (see the module docstring)."""
    spec = json.loads(Path(spec_path).read_text())
    job = json.loads(Path(job_path).read_text())
    method, sizes = job["method"], list(job["batch_sizes"])
    t0 = time.perf_counter()
    llm = _make_llm(spec, job)
    start_s = time.perf_counter() - t0
    settings = {name: job.get(name, v) for name, v in ENGINE_DEFAULTS.items()}
    prompts, max_new = spec["prompts"], spec["max_new_tokens"]
    _serve(llm, prompts[:1], 8, 1)                    # warm-up, not counted
    passes = {}
    for b in sizes:
        llm.collective_rpc(_reset_drafter)
        if settings["prefix_caching"] and not llm.reset_prefix_cache():   # each pass sees the prompts fresh
            raise RuntimeError("vLLM did not clear its prefix cache before a pass: the pass would start warm")
        before, steps0 = _spec_counters(llm), _engine_steps(llm)
        outputs, secs = _serve(llm, prompts, max_new, b, float(job.get("temperature", 0.0)))
        tokens = sum(len(v) for v in outputs.values())
        steps1 = _engine_steps(llm)
        passes[str(b)] = {"outputs": outputs, "seconds": secs, "tokens": tokens, "tokens_per_s": tokens / secs,
                          "engine_steps": steps1 - steps0 if steps0 is not None and steps1 is not None else None,
                          "spec": _delta(_spec_counters(llm), before) if method != "nospec" else None,
                          "proposer": llm.collective_rpc(_proposer_stats)[0] if method == "oilbird" else None}
        print(f"[engine {method}] batch {b}: {tokens} tokens in {secs:.1f} s = {tokens / secs:.2f} tok/s", flush=True)
    import vllm
    Path(result_path).write_text(json.dumps({"method": method, "passes": passes, "engine": {
        "start_seconds": start_s, "vllm": vllm.__version__, **settings,
        "kv_cache_gb": os.environ.get("VLLM_CPU_KVCACHE_SPACE")}}))


def engine_check(spec_path) -> None:
    """The end-to-end check (tests/test_vllm.py): one engine with the Oilbird proposer serves
    the requests once with the proposer switched off (every draft empty: vLLM's plain greedy
    step) and once with it on, checking that every hidden-state row it reads is the one vLLM
    sampled from (``check_layout``); writes ``check.json`` beside the spec."""
    spec = json.loads(Path(spec_path).read_text())
    os.environ["OILBIRD_VLLM_CONFIG"] = json.dumps({"check_layout": True})
    llm = _make_llm(spec, {"method": "oilbird", "k": 6, "batch_sizes": [1]})
    prompts, max_new = spec["prompts"], spec["max_new_tokens"]
    assert llm.collective_rpc(_set_enabled, args=(False,))[0], "the Oilbird proposer is not loaded"
    steps0 = _engine_steps(llm)
    ref, _ = _serve(llm, prompts, max_new, 1)
    off, steps1 = _spec_counters(llm), _engine_steps(llm)
    llm.collective_rpc(_set_enabled, args=(True,))
    llm.collective_rpc(_reset_drafter)
    got, _ = _serve(llm, prompts, max_new, 1)
    spec_d, steps2 = _delta(_spec_counters(llm), off), _engine_steps(llm)
    out = {"outputs_equal": got == ref, "reference": ref, "outputs": got, "drafts_while_off": off["drafts"],
           "accepted_tokens": spec_d["accepted_tokens"], "spec": spec_d,
           "tokens": sum(len(v) for v in got.values()),
           "engine_steps_off": steps1 - steps0 if None not in (steps0, steps1) else None,
           "engine_steps_on": steps2 - steps1 if None not in (steps1, steps2) else None,
           "proposer": llm.collective_rpc(_proposer_stats)[0]}
    (Path(spec_path).parent / "check.json").write_text(json.dumps(out, indent=2))
    print(json.dumps({k: v for k, v in out.items() if k not in ("reference", "outputs")}))


if __name__ == "__main__":     # the internal entry point of the engine processes (vLLM re-imports it)
    a = sys.argv[1:]
    if len(a) == 4 and a[0] == "--engine":
        engine_run(*a[1:])
    elif len(a) == 2 and a[0] == "--check":
        engine_check(a[1])
    else:
        sys.exit("internal: python -m oilbird.serving.serve_bench --engine SPEC JOB RESULT | --check SPEC "
                 "(use `python -m oilbird serve-bench`)")
