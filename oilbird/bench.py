"""Serve a data set through several methods in one run and compare them.

    python -m oilbird bench --data builtin --methods ar,hf-greedy,goose,oilbird --limit 8

Requests are served in order and, for fairness on a noisy machine, request-major: every method
decodes request k before any method sees request k+1, so drift in machine speed hits all
methods alike, and each method's cross-request state (store, tables) grows exactly as in
serving. Every output is audited token for token against an independent greedy run
(``transformers`` ``generate``); ``lossless`` is true only if every request matched.

Metrics (Spec-Bench conventions): tau = generated tokens / target forwards (prefill included;
AR = 1.00); tokens_per_s = generated tokens / wall time (prefill included); speedup =
tokens_per_s / that of ``ar`` in the same run. ``decode_tokens_per_s`` leaves the prefill out.
"""
from __future__ import annotations

import json
import platform
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import torch
from tqdm import tqdm

from .audit import compare, hf_greedy
from .decoding import DecodeResult, autoregressive, encode_requests
from .drafter import TreeConfig
from .methods import PEER_TREE_METHODS
from .presets import PRESETS, make_decoder, tree_variants
from .requests import Request, load_requests
from .trace import BONUS, RequestTrace, save_traces
from .verifier import Verifier

BASELINES = ("ar", "hf-greedy")
PEERS = ("hf-pld", "suffix-arctic")


def known_methods() -> list[str]:
    return list(BASELINES) + list(PRESETS) + list(PEERS)


def _is_tree_method(base: str) -> bool:
    """Methods that verify a draft tree, and so take tree variants."""
    return base in PRESETS or base in PEER_TREE_METHODS


def _split(name: str) -> tuple[str, dict]:
    """``"oilbird:expected:cost-aware"`` -> ("oilbird", {"fill": "expected", "cost_aware": True});
    ``"oilbird"`` -> ("oilbird", {}): the :class:`TreeConfig` fields the name overrides."""
    base, *variants = name.split(":")
    if not variants or base not in known_methods():
        return base, {}                          # an unknown base is reported as such
    if not _is_tree_method(base):
        raise ValueError(f"'{name}': only tree methods take tree variants")
    return tree_variants(name)


def parse_methods(text: str, traced: bool = False) -> list[str]:
    """``"ar,goose, oilbird:expected"`` -> the method names, checked before any model loads:
    each one known, its variants valid, and with ``traced`` a tree method (the only ones with
    cycles to trace). Raises ValueError with the choices."""
    methods = [m.strip() for m in text.split(",") if m.strip()]
    if not methods:
        raise ValueError(f"no method given; choose from {', '.join(known_methods())}")
    for m in methods:
        base, _ = _split(m)                    # a bad variant raises here
        if base not in known_methods():
            raise ValueError(f"unknown method '{m}'; choose from {', '.join(known_methods())}")
        if traced and not _is_tree_method(base):
            raise ValueError(f"'{m}' drafts no tree, so it has no cycles to trace; trace one of "
                             f"{', '.join(list(PRESETS) + list(PEER_TREE_METHODS))}")
    return methods


@dataclass
class MethodStats:
    """Running totals for one method over a run."""
    lossless: bool = True
    first_failure: str | None = None
    stage_seconds: dict = field(default_factory=lambda: defaultdict(float))
    accepted_by_source: dict = field(default_factory=lambda: defaultdict(float))
    sole_by_source: dict = field(default_factory=lambda: defaultdict(int))
    proposed_by_source: dict = field(default_factory=lambda: defaultdict(int))
    nodes: int = 0
    # one row per request (what paired comparisons need); the totals below are their sums
    per_request: list = field(default_factory=list)

    def add_request(self, request_id: str, tokens: int, forwards: int, seconds: float,
                    prefill_seconds: float) -> None:
        self.per_request.append({"request": request_id, "tokens": tokens, "forwards": forwards,
                                 "seconds": seconds, "prefill_seconds": prefill_seconds})

    def _total(self, key: str):
        return sum(r[key] for r in self.per_request)

    tokens = property(lambda self: self._total("tokens"))
    forwards = property(lambda self: self._total("forwards"))
    seconds = property(lambda self: self._total("seconds"))
    prefill_seconds = property(lambda self: self._total("prefill_seconds"))
    n_requests = property(lambda self: len(self.per_request))

    def add_trace(self, tr: RequestTrace) -> None:
        """Fold one request's cycle traces into the per-source and per-stage counters.

        Each committed token is credited once: the bonus to ``bonus``, a drafted token split
        evenly between the sources that proposed its node (so the credits add up to the
        committed tokens exactly); ``sole`` counts tokens only one source proposed.
        """
        for c in tr.cycles:
            for k, v in c.timings.items():
                self.stage_seconds[k] += v
            self.nodes += len(c.tokens)
            for srcs in c.sources[1:]:
                for s in srcs:
                    self.proposed_by_source[s] += 1
            for srcs in c.committed_sources:
                if srcs == [BONUS] or not srcs:
                    self.accepted_by_source[BONUS] += 1
                    continue
                for s in srcs:
                    self.accepted_by_source[s] += 1.0 / len(srcs)
                if len(srcs) == 1:
                    self.sole_by_source[srcs[0]] += 1

    def summary(self) -> dict:
        tps = self.tokens / self.seconds if self.seconds else 0.0
        dec = self.seconds - self.prefill_seconds
        stage_total = sum(v for k, v in self.stage_seconds.items())
        out = {
            "tau": self.tokens / max(1, self.forwards),
            "tokens_per_s": tps,
            # prefill left out; None where the method cannot time its prefill apart (HF generate)
            "decode_tokens_per_s": ((self.tokens - self.n_requests) / dec
                                    if dec > 0 and self.prefill_seconds > 0 else None),
            "lossless": self.lossless,
            "n_requests": self.n_requests,
            "tokens": self.tokens,
            "forwards": self.forwards,
            "seconds": self.seconds,
            "per_request": self.per_request,
        }
        if self.first_failure:
            out["first_failure"] = self.first_failure
        if self.stage_seconds:
            cyc = self.forwards - self.n_requests
            out["mean_nodes"] = self.nodes / max(1, cyc)
            out["stage_share"] = {k: v / stage_total for k, v in self.stage_seconds.items()} if stage_total else {}
            draft_update = self.stage_seconds.get("draft", 0) + self.stage_seconds.get("update", 0)
            out["overhead_share"] = draft_update / stage_total if stage_total else 0.0
            out["accepted_by_source"] = dict(self.accepted_by_source)
            out["sole_by_source"] = dict(self.sole_by_source)
            out["sole_share"] = {k: v / max(1, self.tokens) for k, v in self.sole_by_source.items()}
        return out


def _runner(name: str, verifier: Verifier, max_new: int, keep_traces: bool,
            tree: TreeConfig | None = None, store_kwargs: dict | None = None) -> Callable:
    """A function (request, ids) -> :class:`~oilbird.decoding.DecodeResult`."""
    lm = verifier.lm
    full = name
    name, variants = _split(name)
    if variants:
        tree = replace(tree or TreeConfig(), **variants)
    if name == "ar":
        return lambda req, ids: autoregressive(verifier, ids, max_new)
    if name == "hf-greedy":
        def run(req, ids):
            t = time.perf_counter()
            toks = hf_greedy(lm, ids, max_new, stock=False)
            return DecodeResult(toks, len(toks), time.perf_counter() - t)
        return run
    if name == "suffix-arctic":
        from .peers import make_arctic_decoder
        dec = make_arctic_decoder(verifier, tree, trace=keep_traces)
    elif name in PEERS:
        from . import peers
        return peers.make_runner(name, verifier, max_new, trace=keep_traces, tree=tree)
    else:
        dec = make_decoder(name, verifier, trace=keep_traces, tree=tree, store_kwargs=store_kwargs)
    dec.method = full          # traces say "goose:cost-aware", not "goose", for a suffixed name
    return decoder_runner(dec, max_new)


def decoder_runner(dec, max_new: int) -> Callable:
    """The bench runner of a :class:`~oilbird.decoding.SpeculativeDecoder` (cycle 0 = prefill)."""
    def run(req, ids):
        t = time.perf_counter()
        tr = dec.run(req.id, ids, max_new)
        secs = time.perf_counter() - t
        return DecodeResult(tr.output_ids, tr.forwards, secs, tr.cycles[0].timings.get("verify", 0.0), tr)
    return run


def run_bench(requests: list[Request], methods: list[str], verifier: Verifier, max_new_tokens: int = 128,
              trace_out: Path | None = None, progress: bool = True, tree: TreeConfig | None = None,
              store_kwargs: dict | None = None, checkpoint: Callable[[dict], None] | None = None) -> dict:
    """Decode ``requests`` with every method; return the results dict (see module doc).

    ``checkpoint`` (optional) receives the results so far after every request, so an
    interrupted long run still leaves its numbers behind.
    """
    unknown = [m for m in methods if _split(m)[0] not in known_methods()]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; choose from {', '.join(known_methods())}")
    lm = verifier.lm
    runners = {m: _runner(m, verifier, max_new_tokens, keep_traces=trace_out is not None, tree=tree,
                          store_kwargs=store_kwargs) for m in methods}
    stats = {m: MethodStats() for m in methods}
    traces: list[RequestTrace] = []
    encoded = encode_requests(lm, requests, max_new_tokens)
    if encoded:
        warm_up(verifier, encoded[0][1], tree)
    bar = tqdm(encoded, desc="bench", unit="req", disable=not progress)
    for req, ids in bar:
        outputs: dict[str, list[int]] = {}
        req_traces: list[RequestTrace] = []
        for m in methods:
            r = runners[m](req, ids)
            outputs[m] = r.output_ids
            st = stats[m]
            st.add_request(req.id, len(r.output_ids), r.forwards, r.seconds, r.prefill_seconds)
            if r.trace is not None:
                st.add_trace(r.trace)
                req_traces.append(r.trace)
        # the audit: every output against an independent greedy run of the same request, on
        # stock kernels (so not the timed hf-greedy, which runs on the decoders' kernels)
        ref = hf_greedy(lm, ids, max_new_tokens)
        for m in methods:
            res = compare(ref, outputs[m])
            stats[m].per_request[-1]["lossless"] = res.lossless
            if not res.lossless:
                stats[m].lossless = False
                stats[m].first_failure = stats[m].first_failure or f"{req.id}: {res.message()}"
        for tr in req_traces:
            tr.lossless = compare(ref, tr.output_ids).lossless
        if trace_out is not None:
            traces.extend(req_traces)
        if checkpoint is not None:
            checkpoint(_results(stats, lm, len(encoded), max_new_tokens, tree, store_kwargs))
    if trace_out is not None:
        save_traces(traces, trace_out)
    return _results(stats, lm, len(encoded), max_new_tokens, tree, store_kwargs)


def warm_up(verifier: Verifier, ids: list[int], tree: TreeConfig | None = None) -> None:
    """Untimed: a short decode down each code path (our AR loop, ``generate``, a tree verify)
    on the first prompt, so that the first timed method does not pay the one-off costs
    (kernel selection, allocator growth for a long prompt) alone. Measured without it: the
    first method of an API-Bank run took 16.9 s on request 1 against 9.1 s for the second."""
    autoregressive(verifier, ids, 8)
    hf_greedy(verifier.lm, ids, 4)
    hf_greedy(verifier.lm, ids, 4, stock=False)
    make_decoder("pld", verifier, tree=tree, trace=False).run("warm-up", ids, 8)


def _results(stats: dict, lm, n_requests: int, max_new_tokens: int, tree, store_kwargs) -> dict:
    results = {m: s.summary() for m, s in stats.items()}
    for m, r in results.items():   # the tree size each tree method ran with
        base, variants = _split(m)
        if _is_tree_method(base):
            cfg = replace(tree or TreeConfig(), **variants)
            r["tree_size"] = "cost-aware" if cfg.cost_aware else "fixed"
            r["fill"] = cfg.fill
    base = results.get("ar", {}).get("tokens_per_s")
    base_dec = results.get("ar", {}).get("decode_tokens_per_s")
    for m, r in results.items():
        r["speedup"] = r["tokens_per_s"] / base if base else None
        r["decode_speedup"] = (r["decode_tokens_per_s"] / base_dec
                               if base_dec and r["decode_tokens_per_s"] else None)
    done = min((s.n_requests for s in stats.values()), default=0)
    return {"methods": results, "model": lm.name, "n_requests": done, "n_requests_planned": n_requests,
            "max_new_tokens": max_new_tokens, "tree": asdict(tree or TreeConfig()),
            "store": dict(store_kwargs or {}),
            "machine": {"platform": platform.platform(), "processor": platform.processor(),
                        "device": str(lm.device), "dtype": str(lm.dtype),
                        "gemm": lm.gemm, "threads": torch.get_num_threads()}}


def format_table(results: dict) -> str:
    rows = [f"{'method':24s} {'tau':>6s} {'tok/s':>8s} {'speedup':>8s} {'dec.spd':>8s} {'ovh%':>6s} lossless"]
    for m, r in results["methods"].items():
        spd = f"{r['speedup']:.2f}x" if r.get("speedup") else "-"
        dspd = f"{r['decode_speedup']:.2f}x" if r.get("decode_speedup") else "-"
        ovh = f"{100 * r['overhead_share']:.1f}" if "overhead_share" in r else "-"
        rows.append(f"{m:24s} {r['tau']:6.2f} {r['tokens_per_s']:8.2f} {spd:>8s} {dspd:>8s} {ovh:>6s} "
                    f"{'yes' if r['lossless'] else 'NO'}")
    return "\n".join(rows)


def tree_config(args) -> TreeConfig:
    """The tree of ``--budget`` / ``--semantic-budget`` / ``--tree-size`` / ``--fill`` (defaults
    where not given)."""
    size = getattr(args, "tree_size", None)
    semantic = args.semantic_budget
    if semantic is None and args.budget is not None:   # a small --budget shrinks the default reserve
        semantic = min(TreeConfig.semantic_budget, max(0, args.budget - 1))
    return TreeConfig(**{k: v for k, v in (("budget", args.budget), ("semantic_budget", semantic),
                                           ("cost_aware", None if size is None else size == "cost-aware"),
                                           ("fill", getattr(args, "fill", None)))
                         if v is not None})


def main(args) -> int:
    from .model import load_model
    methods = parse_methods(args.methods)
    tree = tree_config(args)
    out = Path(args.out)             # checked by the CLI (check_out): no earlier results lost
    requests = load_requests(args.data, limit=args.limit, skip=args.skip)
    lm = load_model(args.model)
    verifier = Verifier(lm)
    store_kwargs = {"state_dtype": args.state_dtype, "index_type": args.store_index}
    if args.store_capacity:
        store_kwargs["max_records"] = args.store_capacity

    def save(res: dict) -> None:
        res["data"] = str(args.data)
        res["skip"] = args.skip
        out.mkdir(parents=True, exist_ok=True)     # only once there is something to write
        tmp = out / "results.json.tmp"
        tmp.write_text(json.dumps(res, indent=2))
        tmp.replace(out / "results.json")

    res = run_bench(requests, methods, verifier, args.max_new_tokens,
                    trace_out=out / "traces.jsonl" if args.traces else None, tree=tree,
                    store_kwargs=store_kwargs, checkpoint=save)
    save(res)
    print(format_table(res))
    print(f"wrote {out / 'results.json'}")
    from .report import write_report
    for p in write_report(res, out):
        print(f"wrote {p}")
    return 0 if all(r["lossless"] for r in res["methods"].values()) else 1
