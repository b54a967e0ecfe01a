"""Bench results as data: per-method running totals and the results table. No torch here, so
:mod:`oilbird.evaluation.report` and the views read results without loading the model stack.

Metrics (Spec-Bench conventions): tau = generated tokens / target forwards (prefill included;
AR = 1.00); tokens_per_s = generated tokens / wall time (prefill included); speedup =
tokens_per_s / that of ``ar`` in the same run. ``decode_tokens_per_s`` leaves the prefill out.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ..trace import BONUS, RequestTrace


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
                    prefill_seconds: float, unit: str | None = None) -> None:
        """One request's row; ``unit``: the conversation (or source file) it belongs to, where
        requests are turns of one (a pooled ratio's interval draws whole units:
        :mod:`oilbird.evaluation.intervals`)."""
        self.per_request.append({"request": request_id, "tokens": tokens, "forwards": forwards,
                                 "seconds": seconds, "prefill_seconds": prefill_seconds,
                                 **({"unit": unit} if unit is not None else {})})

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


def with_speedups(methods: dict[str, dict]) -> dict[str, dict]:
    """Add ``speedup`` and ``decode_speedup`` over ``ar`` (None without an ``ar`` row)."""
    base = methods.get("ar", {}).get("tokens_per_s")
    base_dec = methods.get("ar", {}).get("decode_tokens_per_s")
    for r in methods.values():
        r["speedup"] = r["tokens_per_s"] / base if base else None
        r["decode_speedup"] = (r["decode_tokens_per_s"] / base_dec
                               if base_dec and r["decode_tokens_per_s"] else None)
    return methods


def check_cell(r: dict) -> str:
    """A method's verdict for a table: lossless (audited against greedy, or under sampling against
    plain sampling with the same seed), or invalid tokens; a sampled run of a version before the
    sampled audit (``lossless`` null) says the checks it passed instead."""
    if r.get("lossless") is None:
        ok = r.get("reproducible") and r.get("valid")
        return "seed-reproducible, valid" if ok else "NOT reproducible or invalid"
    if r.get("valid") is False:
        return "NO (invalid tokens)"
    return "yes" if r["lossless"] else "NO"


def num_cell(v, fmt: str) -> str:
    return fmt.format(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else "-"


# what a run timed, per method: (name in the printed table, name in the Markdown table, cell);
# "-" where the run did not time it (a fast replay times nothing)
TIMED = (("tok/s", "tokens/s", lambda r: num_cell(r.get("tokens_per_s"), "{:.2f}")),
         ("speedup", "speedup", lambda r: num_cell(r.get("speedup"), "{:.2f}x")),
         ("dec.spd", "decode speedup", lambda r: num_cell(r.get("decode_speedup"), "{:.2f}x")),
         ("ovh%", "overhead %", lambda r: num_cell(100 * r["overhead_share"] if "overhead_share" in r else None,
                                                "{:.1f}")))


def measured(columns, methods: dict) -> list:
    """The ``columns`` (tuples whose last item is the cell function) some method has a value in."""
    return [col for col in columns if any(col[-1](r) != "-" for r in methods.values())]


def check_header(results: dict) -> str:
    """The check column's name: what :func:`check_cell` says for this run."""
    return ("lossless (sampled)" if results.get("sampling") else
            "follows recording" if results.get("replay") else "lossless")


def format_table(results: dict) -> str:
    """The run's table as printed after it: one row per method; a measure no method has (a fast
    replay times nothing) is left out, and the check is named for what it checks."""
    methods = results["methods"]
    widths = {"tok/s": 8, "speedup": 8, "dec.spd": 8, "ovh%": 6}
    shown = measured(TIMED, methods)
    rows = [f"{'method':24s} {'tau':>6s} " + "".join(f"{name:>{widths[name]}s} " for name, _, _ in shown)
            + check_header(results)]
    for m, r in methods.items():
        rows.append(f"{m:24s} {r['tau']:6.2f} " + "".join(f"{cell(r):>{widths[name]}s} " for name, _, cell in shown)
                    + check_cell(r))
    if results.get("sampling"):
        s = results["sampling"]
        rows.append(f"sampled: temperature {s['temperature']:g}, top-p {s['top_p']:g}, seed {s['seed']}; "
                    f"checked: {s['checked']}")
    return "\n".join(rows)
