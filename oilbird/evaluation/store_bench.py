"""How the store scales: retrieval time and memory from 1k to 1M records (issue 7).

    python -m oilbird.evaluation.store_bench                       # scale: fp16 / int8 / pq / int8-ivf, 1k..1M records
    python -m oilbird.evaluation.store_bench scale --sizes 1000,10000,100000 --dtypes int8
    python -m oilbird.evaluation.store_bench compaction            # eviction strategies at 100k records
    python -m oilbird.evaluation.store_bench cycle                 # CPU ms of one decoding cycle (default model)
    python -m oilbird.evaluation.store_bench tau --data api-bank --limit 12   # tau: fp16/int8 x capped/uncapped

Everything runs on one thread (``faiss.omp_set_num_threads(1)``, ``torch.set_num_threads(1)``)
and is timed in **CPU seconds of this process** (``time.process_time``) as well as wall time:
on a shared machine wall time measures the neighbours, CPU time measures the code, and the
"share of a cycle" compares CPU with CPU.

``scale`` grows one synthetic store per state type (d = 576, the default model's hidden size;
requests of 128 tokens drawn from repeated templates, so suffix matches are long and frequent;
clustered unit states), each in a fresh subprocess so its memory can be read from the process
RSS. At each size it measures, per simulated cycle, what the two store readers do:
``search`` (top-8 cosine) plus the semantic source's 8 ``continuation``/``record`` reads, and
``suffix.match`` (max 16) plus up to 16 continuations. Then it caps the store at that size and
serves 30% more records through it: the CPU time of ``add`` + ``end_request`` per token,
eviction and compaction included, is the upkeep; times tokens per cycle (``--tau``) it is the
upkeep per cycle. Writes ``scale.json`` and ``scale.html`` (plotly, self-contained) to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

DIM = 576
REQ_LEN = 128
VOCAB = 49152


def _rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Synthetic:
    """Requests from repeated templates with fresh values, and clustered unit states."""

    def __init__(self, seed: int = 0, templates: int = 64, centers: int = 1024, dim: int = DIM):
        self.rng = np.random.default_rng(seed)
        self.templates = self.rng.integers(0, VOCAB, (templates, REQ_LEN))
        c = self.rng.standard_normal((centers, dim)).astype(np.float32)
        self.centers = c / np.linalg.norm(c, axis=1, keepdims=True)
        self.dim = dim

    def request(self) -> tuple[np.ndarray, np.ndarray]:
        rng = self.rng
        toks = self.templates[rng.integers(len(self.templates))].copy()
        fresh = rng.random(REQ_LEN) < 0.1
        toks[fresh] = rng.integers(0, VOCAB, int(fresh.sum()))
        x = self.centers[rng.integers(len(self.centers), size=REQ_LEN)]
        x = x + (0.6 / np.sqrt(self.dim)) * rng.standard_normal((REQ_LEN, self.dim)).astype(np.float32)
        return toks, x

    def query(self) -> tuple[list[int], np.ndarray]:
        toks, x = self.request()
        cut = int(self.rng.integers(8, REQ_LEN - 1))
        q = x[cut] / np.linalg.norm(x[cut])
        return toks[:cut].tolist(), q.astype(np.float32)


def _serve(store, syn: Synthetic, n_tokens: int, rid: str, shadow: list | None = None
           ) -> tuple[float, float, int]:
    """Feed requests until ``n_tokens`` more records went through; (cpu s, wall s, tokens).
    ``shadow`` collects the exact states (fp16) in record order."""
    cpu = wall = 0.0
    done = 0
    k = 0
    while done < n_tokens:
        toks, x = syn.request()
        if shadow is not None:
            shadow.append((x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float16))
        c0, w0 = time.process_time(), time.perf_counter()
        for i in range(REQ_LEN):
            store.add(f"{rid}{k}", i, int(toks[i]), x[i])
        store.end_request()
        cpu += time.process_time() - c0
        wall += time.perf_counter() - w0
        done += REQ_LEN
        k += 1
    return cpu, wall, done


def _retrieve(store, syn: Synthetic, n_queries: int) -> dict:
    """CPU and wall ms per simulated cycle of the two readers."""
    qs = [syn.query() for _ in range(n_queries)]
    hits = [store.search(q, 8) for _, q in qs]
    out = {}

    def search(i):
        store.search(qs[i][1], 8)

    def reads(i):                # what the semantic source reads for its neighbours
        for rec, _ in hits[i]:
            store.continuation(rec, 2, 48)
            store.record(rec)

    def suffix(i):               # what the suffix source does with the store's index
        sx = store.suffix
        for p, _ in sx.match(qs[i][0], max_len=16)[:16]:
            sx.continuation(p, 32)

    for name, fn in (("search", search), ("reads", reads), ("suffix", suffix)):
        fn(0)   # warm
        c0, w0 = time.process_time(), time.perf_counter()
        for i in range(n_queries):
            fn(i)
        out[name + "_cpu_ms"] = 1e3 * (time.process_time() - c0) / n_queries
        out[name + "_wall_ms"] = 1e3 * (time.perf_counter() - w0) / n_queries
    out["retrieval_cpu_ms"] = out["search_cpu_ms"] + out["reads_cpu_ms"] + out["suffix_cpu_ms"]
    out["retrieval_wall_ms"] = out["search_wall_ms"] + out["reads_wall_ms"] + out["suffix_wall_ms"]
    return out


def _quality(store, shadow: np.ndarray, syn: Synthetic, n_queries: int) -> dict:
    """Against brute force over the exact live states: how often the store's top-1 is the
    true top-1, and how much cosine its top-1 gives away."""
    live = shadow[store.first_record:store.next_record].astype(np.float32)
    same = loss = 0.0
    for _ in range(n_queries):
        _, q = syn.query()
        sims = live @ q
        hits = store.search(q, 8)
        top = int(np.argmax(sims))
        same += hits[0][0] - store.first_record == top
        loss += float(sims[top] - sims[hits[0][0] - store.first_record])
    return {"top1_same": same / n_queries, "top1_cos_loss": loss / n_queries}


def _worker(dtype: str, sizes: list[int], queries: int, seed: int) -> list[dict]:
    import faiss

    from ..store import Store
    faiss.omp_set_num_threads(1)
    syn = Synthetic(seed)
    qsyn = Synthetic(seed)           # same templates and centres, its own random stream
    qsyn.rng = np.random.default_rng(seed + 1)
    base_rss = _rss_bytes()
    kind, _, index_type = dtype.partition("-")
    store = Store(DIM, tenant="bench", state_dtype=kind, index_type=index_type or "flat")
    shadow_max = 100_000
    shadow: list | None = []
    rows = []
    for n in sizes:
        store.max_records = None
        if shadow is not None and n > shadow_max:
            shadow = None
        cpu, wall, added = _serve(store, syn, n - len(store), "grow", shadow)
        grow_tok = added or 1
        nq = queries if n <= 100_000 else max(20, queries // 5)
        r = {"dtype": dtype, "records": len(store), "queries": nq, "trained": store.trained}
        r.update(_retrieve(store, qsyn, nq))
        if shadow is not None:
            r.update(_quality(store, np.concatenate(shadow), qsyn, min(nq, 50)))
        r["rss_bytes"] = _rss_bytes() - base_rss
        r["nbytes"] = store.nbytes()
        r["bytes_per_record"] = store.nbytes() / len(store)
        r["rss_per_record"] = r["rss_bytes"] / len(store)
        r["record_nbytes"] = store.record_nbytes
        r["grow_cpu_us_per_token"] = 1e6 * cpu / grow_tok
        # steady state at capacity: every request evicts the oldest, compaction included
        store.max_records = n
        before = dict(store.upkeep_seconds)
        cpu, wall, added = _serve(store, syn, max(int(0.3 * n), 20 * REQ_LEN), "steady", shadow)
        r["upkeep_cpu_us_per_token"] = 1e6 * cpu / added
        r["upkeep_wall_us_per_token"] = 1e6 * wall / added
        r["upkeep_parts_ms"] = {k: 1e3 * (store.upkeep_seconds[k] - before[k]) for k in before}
        r["steady_tokens"] = added
        r["compactions_bytes_after"] = store.nbytes()
        rows.append(r)
        print(json.dumps(r), flush=True)
    return rows


def scale(args) -> int:
    dtypes = [d.strip() for d in args.dtypes.split(",")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cycle_ms, tau, cycle_src = _cycle_assumption(args, out)
    rows = []
    if args.merge and (out / "scale.json").is_file():   # keep the other dtypes of an earlier run
        rows = [r for r in json.loads((out / "scale.json").read_text())["rows"] if r["dtype"] not in dtypes]
    for dt in dtypes:
        cmd = [sys.executable, "-m", "oilbird.evaluation.store_bench", "_worker", "--dtypes", dt,
               "--sizes", args.sizes, "--queries", str(args.queries), "--seed", str(args.seed)]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            print(p.stderr[-3000:], file=sys.stderr)
            return 1
        got = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
        rows += got
        print(f"[{dt}] {len(got)} sizes in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    for r in rows:
        r["upkeep_cpu_ms_per_cycle"] = r["upkeep_cpu_us_per_token"] * tau / 1e3
        r["cycle_share"] = (r["retrieval_cpu_ms"] + r["upkeep_cpu_ms_per_cycle"]) / cycle_ms
    res = {"cycle_cpu_ms": cycle_ms, "tokens_per_cycle": tau, "cycle_source": cycle_src,
           "dim": DIM, "request_len": REQ_LEN, "rows": rows,
           "machine": {"cpus": os.cpu_count(), "load": os.getloadavg()}}
    (out / "scale.json").write_text(json.dumps(res, indent=1))
    print(format_scale(res))
    _figure(res, out / "scale.html")
    print(f"wrote {out / 'scale.json'} and {out / 'scale.html'}")
    return 0


def _cycle_assumption(args, out: Path) -> tuple[float, float, str]:
    if args.cycle_ms:
        return float(args.cycle_ms), float(args.tau), "--cycle-ms"
    f = out / "cycle.json"
    if f.is_file():
        c = json.loads(f.read_text())
        return float(c["cycle_cpu_ms_median"]), float(c["tau"]), str(f)
    return 150.0, float(args.tau), "assumed 150 ms (run `python -m oilbird.evaluation.store_bench cycle`)"


def format_scale(res: dict) -> str:
    lines = [f"cycle: {res['cycle_cpu_ms']:.0f} CPU ms, {res['tokens_per_cycle']:.2f} tokens/cycle "
             f"({res['cycle_source']})",
             f"{'dtype':8s} {'records':>9s} {'search':>8s} {'reads':>8s} {'suffix':>8s} {'retr.':>8s} "
             f"{'upkeep':>8s} {'share':>6s} {'B/rec':>7s} {'RSS/rec':>8s} {'RSS MB':>8s} {'top1=':>6s} "
             f"{'cosloss':>7s}",
             f"{'':8s} {'':>9s} {'cpu ms':>8s} {'cpu ms':>8s} {'cpu ms':>8s} {'cpu ms':>8s} "
             f"{'ms/cyc':>8s}"]
    for r in res["rows"]:
        q = (f"{r['top1_same']:6.2f} {r['top1_cos_loss']:7.4f}" if "top1_same" in r else f"{'-':>6s} {'-':>7s}")
        lines.append(f"{r['dtype']:8s} {r['records']:9d} {r['search_cpu_ms']:8.3f} "
                     f"{r['reads_cpu_ms']:8.3f} {r['suffix_cpu_ms']:8.3f} "
                     f"{r['retrieval_cpu_ms']:8.3f} {r['upkeep_cpu_ms_per_cycle']:8.3f} "
                     f"{100 * r['cycle_share']:5.1f}% {r['bytes_per_record']:7.0f} "
                     f"{r['rss_per_record']:8.0f} {r['rss_bytes'] / 2**20:8.1f} {q}")
    return "\n".join(lines)


def _figure(res: dict, path: Path) -> None:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots
    fig = make_subplots(rows=1, cols=2, subplot_titles=(
        "retrieval + upkeep per cycle (CPU ms, one thread)", "memory per record (bytes)"))
    colors = {"fp16": "#1f77b4", "int8": "#d62728", "pq": "#2ca02c", "int8-ivf": "#9467bd",
              "fp16-ivf": "#17becf", "pq-ivf": "#8c564b"}
    for dt in dict.fromkeys(r["dtype"] for r in res["rows"]):
        rs = [r for r in res["rows"] if r["dtype"] == dt]
        x = [r["records"] for r in rs]
        c = colors.get(dt)
        fig.add_trace(go.Scatter(x=x, y=[r["retrieval_cpu_ms"] + r["upkeep_cpu_ms_per_cycle"] for r in rs],
                                 name=f"{dt}: retrieval + upkeep", line=dict(color=c)), 1, 1)
        fig.add_trace(go.Scatter(x=x, y=[r["search_cpu_ms"] for r in rs], name=f"{dt}: faiss search",
                                 line=dict(color=c, dash="dot")), 1, 1)
        fig.add_trace(go.Scatter(x=x, y=[r["suffix_cpu_ms"] for r in rs], name=f"{dt}: suffix match",
                                 line=dict(color=c, dash="dash")), 1, 1)
        fig.add_trace(go.Scatter(x=x, y=[r["rss_per_record"] for r in rs], name=f"{dt}: process RSS",
                                 line=dict(color=c)), 1, 2)
        fig.add_trace(go.Scatter(x=x, y=[r["bytes_per_record"] for r in rs], name=f"{dt}: store.nbytes()",
                                 line=dict(color=c, dash="dot")), 1, 2)
    # reference lines as traces: a shape's annotation on a log axis would take y as log10
    xs = [min(r["records"] for r in res["rows"]), max(r["records"] for r in res["rows"])]
    budget = 0.05 * res["cycle_cpu_ms"]
    fig.add_trace(go.Scatter(x=xs, y=[budget] * 2, mode="lines", line=dict(color="gray", dash="dash"),
                             name=f"5% of a {res['cycle_cpu_ms']:.0f} CPU ms cycle"), 1, 1)
    fig.add_trace(go.Scatter(x=xs, y=[5.0] * 2, mode="lines", line=dict(color="gray", dash="dot"),
                             name="5% of a 100 ms cycle"), 1, 1)
    fig.add_trace(go.Scatter(x=xs, y=[600] * 2, mode="lines", line=dict(color="gray", dash="dash"),
                             name="600 B/record"), 1, 2)
    fig.update_xaxes(type="log", title_text="live records")
    fig.update_yaxes(type="log", row=1, col=1, title_text="ms")
    fig.update_yaxes(type="log", row=1, col=2, title_text="bytes")
    fig.update_layout(title=f"Oilbird store scaling (d={res['dim']}, synthetic states)", height=640,
                      width=1250, template="plotly_white")
    fig.write_html(str(path), include_plotlyjs=True)


# -- eviction strategies ---------------------------------------------------------------------------
def compaction(args) -> int:
    """What one evicted request costs under each strategy, at ``--records`` records."""
    import faiss

    from ..state_index import new_state_index
    from ..store import Store
    faiss.omp_set_num_threads(1)
    n, m = args.records, REQ_LEN
    slack = int(0.25 * n)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n + slack, DIM)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = x[:1]
    res = {"records": n, "request_len": m, "slack_records": slack}

    def cpu(fn, reps=1):
        c0 = time.process_time()
        for _ in range(reps):
            fn()
        return 1e3 * (time.process_time() - c0) / reps

    for kind in ("fp16", "int8"):
        r = {}
        ix = new_state_index(DIM, kind)
        ix.add(x[:n])
        reps = 10
        r["eager_remove_ids_ms_per_request"] = cpu(lambda: ix.remove_ids(faiss.IDSelectorRange(0, m)), reps)
        ix2 = faiss.IndexIDMap2(new_state_index(DIM, kind))
        ix2.add_with_ids(x[:n], np.arange(n, dtype=np.int64))
        lo = [0]

        def idmap_remove():
            ix2.remove_ids(faiss.IDSelectorRange(lo[0], lo[0] + m))
            lo[0] += m
        r["idmap2_remove_ids_ms_per_request"] = cpu(idmap_remove, reps)
        ix = new_state_index(DIM, kind)
        ix.add(x[:n + slack])
        r["lazy_remove_ids_ms_per_compaction"] = cpu(lambda: ix.remove_ids(faiss.IDSelectorRange(0, slack)))
        ix = new_state_index(DIM, kind)
        ix.add(x[:n + slack])

        def rebuild():
            codes = faiss.vector_to_array(ix.codes).reshape(-1, ix.code_size)[slack:]
            new = new_state_index(DIM, kind)
            new.add_sa_codes(codes)
            return new
        r["lazy_rebuild_ms_per_compaction"] = cpu(rebuild)
        per = slack / m
        r["lazy_remove_ids_ms_per_request"] = r["lazy_remove_ids_ms_per_compaction"] / per
        r["lazy_rebuild_ms_per_request"] = r["lazy_rebuild_ms_per_compaction"] / per
        ix = new_state_index(DIM, kind)
        ix.add(x[:n + slack])
        sel = faiss.SearchParameters(sel=faiss.IDSelectorRange(slack, n + slack))
        ix.search(q, 8)
        r["search_ms_all_rows"] = cpu(lambda: ix.search(q, 8), 20)
        r["search_ms_selector_dead_25pct"] = cpu(lambda: ix.search(q, 8, params=sel), 20)
        ix = new_state_index(DIM, kind)
        ix.add(x[:n])
        r["search_ms_compacted"] = cpu(lambda: ix.search(q, 8), 20)
        res[kind] = r
    # the suffix index: compaction of n + slack tokens
    s = Store(DIM, state_dtype="int8", compact_slack=10.0)
    syn = Synthetic(0)
    for k in range((n + slack) // m):
        toks, _ = syn.request()
        for i in range(m):
            s.add(f"r{k}", i, int(toks[i]), None)
        s.end_request()
    s.max_records = n
    s._enforce()
    res["suffix_compaction_ms"] = cpu(s.compact)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compaction.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))
    return 0


# -- the cycle it is measured against ----------------------------------------------------------------
def _single_thread_model(args):
    """The model of ``args.model`` with torch and faiss on one thread (the per-core numbers)."""
    import faiss
    import torch

    from ..model import load_model
    torch.set_num_threads(1)
    faiss.omp_set_num_threads(1)
    return load_model(args.model)


def cycle(args) -> int:
    """CPU ms per decoding cycle of the default model, oilbird preset, builtin requests."""
    from ..presets import make_decoder
    from ..data.requests import encode, load_requests
    from ..verifier import Verifier
    lm = _single_thread_model(args)
    dec = make_decoder("oilbird", Verifier(lm), trace=False)
    cpu, wall, draft = [], [], []
    toks = fwd = 0
    for req in load_requests(args.data, limit=args.requests):
        ids = encode(lm.tokenizer, req)
        c0, w0 = time.process_time(), time.perf_counter()
        for c in dec.cycles(req.id, ids, args.max_new_tokens):
            c1, w1 = time.process_time(), time.perf_counter()
            if c.cycle > 0:
                cpu.append(c1 - c0)
                wall.append(w1 - w0)
                draft.append(c.timings.get("draft", 0.0))
                toks += len(c.committed)
                fwd += 1
            c0, w0 = time.process_time(), time.perf_counter()
    cpu_ms, wall_ms = 1e3 * np.array(cpu), 1e3 * np.array(wall)
    res = {"model": lm.name, "data": args.data, "requests": args.requests, "cycles": len(cpu),
           "cycle_cpu_ms_median": float(np.median(cpu_ms)), "cycle_cpu_ms_mean": float(cpu_ms.mean()),
           "cycle_wall_ms_median": float(np.median(wall_ms)), "cycle_wall_ms_mean": float(wall_ms.mean()),
           "draft_wall_ms_median": float(1e3 * np.median(draft)),
           "tau": toks / max(1, fwd), "threads": 1, "load": os.getloadavg(),
           "how": "process_time between the decoder's per-cycle yields (cycle 0 = prefill excluded)"}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cycle.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))
    return 0


# -- tau: capped / uncapped x fp16 / int8 on real requests ----------------------------------------
def tau(args) -> int:
    """tau and losslessness of the oilbird preset with store variants, plus state fidelity."""
    from ..audit import compare, explain, hf_greedy
    from ..presets import make_decoder
    from ..data.requests import encode, load_requests
    from ..store import Store
    from ..verifier import Verifier
    lm = _single_thread_model(args)
    v = Verifier(lm)
    dim = int(lm.model.config.hidden_size)
    reqs = load_requests(args.data, limit=args.limit)
    enc = [(r, encode(lm.tokenizer, r)) for r in reqs]
    t0 = time.perf_counter()
    refs = [hf_greedy(lm, ids, args.max_new_tokens) for _, ids in enc]
    total = sum(len(r) for r in refs)
    cap = max(1, int(args.capacity * total))
    print(f"{len(enc)} requests, {total} generated tokens (reference in {time.perf_counter() - t0:.0f} s); "
          f"cap = {cap} records", file=sys.stderr)
    configs = [(dt, c) for dt in args.dtypes.split(",") for c in (None, cap)]
    res = {"data": str(args.data), "limit": args.limit, "max_new_tokens": args.max_new_tokens,
           "generated_tokens": total, "capacity": cap, "configs": {}}
    stores = {}
    for dt, c in configs:
        name = f"{dt}-{'cap' + str(c) if c else 'uncapped'}"
        store = Store(dim, tenant="tau", state_dtype=dt, max_records=c,
                      pq_train_size=min(4096, max(256, total // 3)))
        dec = make_decoder("oilbird", v, store=store, trace=True)
        toks = fwd = sem = 0
        lossless = True
        first_fail = None
        t1 = time.perf_counter()
        for (req, ids), ref in zip(enc, refs):
            tr = dec.run(req.id, ids, args.max_new_tokens)
            toks += len(tr.output_ids)
            fwd += tr.forwards
            sem += sum(len(cy.neighbours) > 0 for cy in tr.cycles)
            a = compare(ref, tr.output_ids)
            if not a.lossless:
                lossless = False
                first_fail = first_fail or f"{req.id}: {explain(lm, ids, a).message()}"
        stores[name] = store
        res["configs"][name] = {"tau": toks / max(1, fwd), "tokens": toks, "forwards": fwd,
                                "lossless": lossless, "first_failure": first_fail,
                                "cycles_with_neighbours": sem, "records": len(store),
                                "evicted": store.evicted_records, "nbytes": store.nbytes(),
                                "record_nbytes": store.record_nbytes,
                                "seconds": time.perf_counter() - t1}
        print(name, json.dumps(res["configs"][name]), file=sys.stderr, flush=True)
    base = next(iter(res["configs"].values()))["tau"]
    for r in res["configs"].values():
        r["tau_change_pct"] = 100 * (r["tau"] / base - 1)
    ref_store = stores.get("fp16-uncapped")
    if ref_store is not None and len(ref_store) > 50:
        res["fidelity"] = _fidelity(ref_store.states.astype(np.float32), args.dtypes.split(","))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tau.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))
    return 0 if all(r["lossless"] for r in res["configs"].values()) else 1


def _fidelity(x: np.ndarray, dtypes: list[str]) -> dict:
    """On real states: does a quantized index change what the semantic source decides?

    Queries are the stored states themselves (leave-one-out, top-8 among the others); a
    decision is (best record, copy-depth tier of the best: 0 / 8 / 48)."""
    from ..sources.semantic import SemanticConfig, copy_depth
    from ..state_index import new_state_index
    x = x[np.linalg.norm(x, axis=1) > 0]
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    n = len(x)
    floor = SemanticConfig.entry_floor

    def decisions(ix):
        sims, rows = ix.search(x, 9)
        out = []
        for i in range(n):
            keep = [(r, s) for r, s in zip(rows[i], sims[i]) if r != i and r >= 0][:8]
            best_r, best_s = keep[0]
            out.append((best_r, best_s if best_s >= floor else 0.0))
        return out

    exact = new_state_index(x.shape[1], "fp16")
    exact.add(x)
    ref = decisions(exact)
    res = {"states": n}
    for dt in dtypes:
        if dt == "fp16":
            continue
        if dt == "pq":
            from ..state_index import default_pq_m
            ix = new_state_index(x.shape[1], "pq", default_pq_m(x.shape[1]), 8)
            ix.train(x)
        else:
            ix = new_state_index(x.shape[1], dt)
        ix.add(x)
        got = decisions(ix)
        same_best = np.mean([a[0] == b[0] for a, b in zip(ref, got)])
        same_tier = np.mean([copy_depth(a[1]) == copy_depth(b[1]) for a, b in zip(ref, got)])
        true_sim = np.mean([abs(float(x[i] @ x[b[0]]) - a[1]) for i, (a, b) in enumerate(zip(ref, got))
                            if a[1] > 0])
        res[dt] = {"same_top1": float(same_best), "same_depth_tier": float(same_tier),
                   "mean_true_cos_loss_of_top1": float(true_sim)}
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m oilbird.evaluation.store_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="?", default="scale", choices=["scale", "compaction", "cycle", "tau", "_worker"])
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--dtypes", default=None, help="fp16,int8,pq,int8-ivf (scale; '-ivf': IVF index) / "
                    "fp16,int8 (tau)")
    ap.add_argument("--merge", action="store_true", help="scale: keep the other dtypes' rows of --out/scale.json")
    ap.add_argument("--queries", type=int, default=100, help="queries per size (1/5 above 100k)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--records", type=int, default=100_000, help="compaction: store size")
    ap.add_argument("--cycle-ms", type=float, default=None, help="CPU ms per cycle to compare with "
                    "(default: --out/cycle.json if present, else 150)")
    ap.add_argument("--tau", type=float, default=2.8, help="tokens committed per cycle (upkeep per cycle)")
    ap.add_argument("--out", default="runs/store_bench")
    ap.add_argument("--model", default=None)
    ap.add_argument("--data", default="builtin")
    ap.add_argument("--requests", type=int, default=6, help="cycle: requests to decode")
    ap.add_argument("--limit", type=int, default=12, help="tau: requests")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--capacity", type=float, default=0.5, help="tau: cap as a fraction of the tokens the run produces")
    args = ap.parse_args(argv)
    if args.what == "_worker":
        _worker(args.dtypes, [int(s) for s in args.sizes.split(",")], args.queries, args.seed)
        return 0
    if args.dtypes is None:
        args.dtypes = "fp16,int8" if args.what == "tau" else "fp16,int8,pq,int8-ivf"
    from .runs import unique
    try:          # a repeat would be measured twice and drawn twice
        unique([d.strip() for d in args.dtypes.split(",")], "--dtypes")
        unique([s.strip() for s in args.sizes.split(",")], "--sizes")
        if not all(s.strip().isdigit() and int(s) > 0 for s in args.sizes.split(",")):
            raise ValueError(f"--sizes must be comma-separated positive record counts, not {args.sizes!r}")
    except ValueError as exc:
        ap.error(str(exc))
    return {"scale": scale, "compaction": compaction, "cycle": cycle, "tau": tau}[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
