"""The bench under sampling (``--temperature > 0``): runners and what is checked instead of the audit.

A sampled output cannot be compared token for token with greedy decoding, nor with another
method's sampled output (each draws differently from the same distributions). What the bench
checks instead, and says it checked (``results.json``: ``sampling.checked``; per method
``reproducible`` and ``valid``; ``lossless`` is null, never true):

* **seed reproducibility**: the first request is decoded a second time by a fresh runner of the
  same method (the state the first run started from) with the same seed; the outputs must be
  equal;
* **valid tokens**, on every request: ids inside the vocabulary, no end-of-sequence before the
  end, and the output ends with end-of-sequence or at ``max_new_tokens``
  (:func:`oilbird.sampled.check_sampled_output`).

That the sampler is lossless in distribution is proven by tests/test_sampling.py, not here.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from typing import Callable

from ..decoding import DecodeResult
from ..methods import Method, TreeConfig
from ..sampled import Sampled, check_sampled_output, sampled_autoregressive
from ..sampling import SamplingParams
from ..verifier import Verifier

CHECKED = ("seed reproducibility (the first request decoded again by a fresh runner with the same seed "
           "gives the same output) and valid tokens on every request; sampled outputs are not "
           "comparable token for token with greedy")


def check_sampled_methods(methods: list[Method]) -> None:
    """Refuse (one line) the methods that cannot sample: they run transformers' greedy generate."""
    for m in methods:
        if m.base in ("hf-greedy", "hf-pld"):
            raise ValueError(f"'{m.name}' runs transformers' greedy generate and cannot sample; with "
                             f"--temperature > 0 choose from ar, suffix-arctic and the presets")


def sampled_runner(m: Method, verifier: Verifier, max_new: int, keep_traces: bool, tree: TreeConfig | None,
                   store_kwargs: dict | None, params: SamplingParams) -> Callable:
    """A function (request, ids) -> DecodeResult that samples with ``params``, each request
    with its own generator (seed, request id)."""
    if m.base == "ar":
        return lambda req, ids: sampled_autoregressive(verifier, ids, max_new, params, req.id)
    check_sampled_methods([m])
    from ..presets import make_decoder
    dec = make_decoder(m, verifier, trace=keep_traces, tree=tree, store_kwargs=store_kwargs)

    def run(req, ids):
        t = time.perf_counter()
        tr = dec.run(req.id, ids, max_new, judge=Sampled(params, req.id))
        secs = time.perf_counter() - t
        tr.meta["sampling"] = asdict(params)
        return DecodeResult(tr.output_ids, tr.forwards, secs, tr.cycles[0].timings.get("verify", 0.0), tr)
    return run


class SampledChecks:
    """The checks of a sampled run (module doc), per method; ``fresh(name)`` builds a new runner."""

    def __init__(self, names: list[str], fresh: Callable[[str], Callable], lm, max_new: int,
                 params: SamplingParams):
        self.names, self.fresh, self.lm, self.max_new, self.params = names, fresh, lm, max_new, params
        self.valid = {n: True for n in names}
        self.reproducible: dict[str, bool | None] = {n: None for n in names}
        self.failure: dict[str, str] = {}
        self.k = 0

    def request(self, req, ids, outputs: dict[str, list[int]], stats: dict) -> None:
        vocab, eos = int(self.lm.model.config.vocab_size), self.lm.eos_token_ids
        for n in self.names:
            why = check_sampled_output(outputs[n], vocab, eos, self.max_new)
            stats[n].per_request[-1]["valid"] = why is None
            if why is not None:
                self.valid[n] = False
                self.failure.setdefault(n, f"{req.id}: {why}")
        if self.k == 0:       # untimed: not added to the stats
            for n in self.names:
                again = self.fresh(n)(req, ids).output_ids
                self.reproducible[n] = again == outputs[n]
                if again != outputs[n]:
                    self.failure.setdefault(n, f"{req.id}: the same seed gave a different output")
        self.k += 1

    def annotate(self, results: dict) -> dict:
        """Put the checks into a results dict (``lossless`` null: not audited)."""
        for n, r in results["methods"].items():
            r["lossless"] = None
            r["reproducible"] = bool(self.reproducible.get(n))
            r["valid"] = self.valid[n]
            if n in self.failure:
                r["first_failure"] = self.failure[n]
            else:
                r.pop("first_failure", None)
        results["sampling"] = {**asdict(self.params), "checked": CHECKED}
        return results
