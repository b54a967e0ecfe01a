"""Serve a data set through several methods in one run and compare them.

    python -m oilbird bench --data builtin --methods ar,hf-greedy,goose,oilbird --limit 8

Requests are served in order and, for fairness on a noisy machine, request-major: every method
decodes request k before any method sees request k+1, so drift in machine speed hits all
methods alike, and each method's cross-request state (store, tables) grows exactly as in
serving. Every output is audited token for token against an independent greedy run
(``transformers`` ``generate``); ``lossless`` is true only if every request matched.

Metrics: :mod:`oilbird.evaluation.results` (tau, tokens/s, speedup over ``ar`` in the same run).
"""
from __future__ import annotations

import platform
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import torch
from tqdm import tqdm

from ..audit import explain, hf_greedy, record_audit
from ..data.requests import encode_requests
from ..decoding import DecodeResult, autoregressive
from ..methods import Method, TreeConfig, as_methods
from ..presets import make_decoder
from ..data.requests import Request, request_unit
from .results import MethodStats, with_speedups
from ..trace import RequestTrace, save_traces
from ..verifier import Verifier


def _runner(m: Method, verifier: Verifier, max_new: int, keep_traces: bool,
            tree: TreeConfig | None = None, store_kwargs: dict | None = None) -> Callable:
    """A function (request, ids) -> :class:`~oilbird.decoding.DecodeResult`."""
    lm = verifier.lm
    if m.base == "ar":
        return lambda req, ids: autoregressive(verifier, ids, max_new)
    if m.base == "hf-greedy":
        def run(req, ids):
            t = time.perf_counter()
            toks = hf_greedy(lm, ids, max_new, stock=False)
            return DecodeResult(toks, len(toks), time.perf_counter() - t)
        return run
    if m.base == "hf-pld":
        from .peers import hf_pld_runner
        return hf_pld_runner(verifier, max_new)
    return decoder_runner(make_decoder(m, verifier, trace=keep_traces, tree=tree, store_kwargs=store_kwargs),
                          max_new)


def decoder_runner(dec, max_new: int) -> Callable:
    """The bench runner of a :class:`~oilbird.decoding.SpeculativeDecoder` (cycle 0 = prefill)."""
    def run(req, ids):
        t = time.perf_counter()
        tr = dec.run(req.id, ids, max_new)
        secs = time.perf_counter() - t
        return DecodeResult(tr.output_ids, tr.forwards, secs, tr.cycles[0].timings.get("verify", 0.0), tr)
    return run


def run_bench(requests: list[Request], methods: list[str | Method], verifier: Verifier, max_new_tokens: int = 128,
              trace_out: Path | None = None, progress: bool = True, tree: TreeConfig | None = None,
              store_kwargs: dict | None = None, checkpoint: Callable[[dict], None] | None = None,
              trace_sink: Callable[[list[RequestTrace]], None] | None = None,
              sampling=None, label: str = "bench") -> dict:
    """Decode ``requests`` with every method; return the results dict (see module doc).

    ``methods``: names or parsed :class:`~oilbird.methods.Method`; ``tree``: the run's tree,
    which each method resolves (:meth:`~oilbird.methods.Method.tree`). After every request,
    ``trace_sink`` (optional) receives that request's traces (every method's) and then
    ``checkpoint`` (optional) the results so far, so an interrupted long run still leaves
    what it did behind (:class:`oilbird.evaluation.runs.Run` writes both). ``trace_out``: a trace file
    written at the end instead, for a caller without a sink. ``sampling``: a
    :class:`~oilbird.sampling.SamplingParams` with temperature > 0 samples instead of greedy;
    the audit is then against plain sampling with the same seed
    (:mod:`oilbird.evaluation.sampled_bench`).
    """
    methods = as_methods(methods, (tree or TreeConfig()).fill)   # (a name without a fill takes the tree's)
    names = [m.name for m in methods]
    lm = verifier.lm
    keep_traces = trace_out is not None or trace_sink is not None
    checks = None
    if sampling is None:
        runners = {m.name: _runner(m, verifier, max_new_tokens, keep_traces=keep_traces, tree=tree,
                                   store_kwargs=store_kwargs) for m in methods}
    else:
        from .sampled_bench import SampledChecks, sampled_runner
        runners = {m.name: sampled_runner(m, verifier, max_new_tokens, keep_traces, tree, store_kwargs, sampling)
                   for m in methods}
        checks = SampledChecks(names, verifier, max_new_tokens, sampling)
    stats = {m.name: MethodStats() for m in methods}
    traces: list[RequestTrace] = []
    encoded = encode_requests(lm, requests, max_new_tokens)
    if encoded:
        warm_up(verifier, encoded[0][1], tree)
    bar = tqdm(encoded, desc=label, unit="req", disable=not progress)   # label: the command the bar belongs to
    for req, ids in bar:
        outputs: dict[str, list[int]] = {}
        req_traces: list[RequestTrace] = []
        for name in names:
            r = runners[name](req, ids)
            outputs[name] = r.output_ids
            st = stats[name]
            st.add_request(req.id, len(r.output_ids), r.forwards, r.seconds, r.prefill_seconds, request_unit(req))
            if r.trace is not None:
                st.add_trace(r.trace)
                req_traces.append(r.trace)
        if checks is not None:      # sampled: audited against plain sampling with the same seed
            checks.request(req, ids, outputs, stats, req_traces)
        else:
            _audit(lm, req, ids, max_new_tokens, names, outputs, stats, req_traces)
        if trace_out is not None:
            traces.extend(req_traces)
        if trace_sink is not None:
            trace_sink(req_traces)
        if checkpoint is not None:
            checkpoint(_results(stats, methods, lm, len(encoded), max_new_tokens, tree, store_kwargs, checks))
    if trace_out is not None:
        save_traces(traces, trace_out)
    return _results(stats, methods, lm, len(encoded), max_new_tokens, tree, store_kwargs, checks)


def _audit(lm, req, ids, max_new_tokens, names, outputs, stats, req_traces) -> None:
    """The audit: every output against an independent greedy run of the same request, on stock
    kernels (so not the timed hf-greedy, which runs on the decoders' kernels)."""
    record_audit(hf_greedy(lm, ids, max_new_tokens), req, names, outputs, stats, req_traces,
                 why=lambda res: explain(lm, ids, res))


def warm_up(verifier: Verifier, ids: list[int], tree: TreeConfig | None = None) -> None:
    """Untimed: a short decode down each code path (our AR loop, ``generate``, a tree verify)
    on the first prompt, so that the first timed method does not pay the one-off costs
    (kernel selection, allocator growth for a long prompt) alone (docs/results.md, "Warm-up")."""
    autoregressive(verifier, ids, 8)
    hf_greedy(verifier.lm, ids, 4)
    hf_greedy(verifier.lm, ids, 4, stock=False)
    make_decoder("pld", verifier, tree=tree, trace=False).run("warm-up", ids, 8)


def _results(stats: dict, methods: list[Method], lm, n_requests: int, max_new_tokens: int, tree,
             store_kwargs, checks=None) -> dict:
    results = {m.name: stats[m.name].summary() for m in methods}
    for m in methods:   # the fill each tree method ran with
        if m.drafts_tree:
            results[m.name]["fill"] = m.tree(tree).fill
    with_speedups(results)
    done = min((s.n_requests for s in stats.values()), default=0)
    out = {"methods": results, "model": lm.name, "n_requests": done, "n_requests_planned": n_requests,
           "max_new_tokens": max_new_tokens, "tree": asdict(tree or TreeConfig()),
           "store": dict(store_kwargs or {}),
           "machine": {"platform": platform.platform(), "processor": platform.processor(),
                       "device": str(lm.device), "dtype": str(lm.dtype),
                       "gemm": lm.gemm, "threads": torch.get_num_threads()}}
    return out if checks is None else checks.annotate(out)
