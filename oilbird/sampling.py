"""Sampling (temperature, top-p) and the lossless acceptance rule for a tree of deterministic drafts.

What this module knows: a request's sampling settings (:class:`SamplingParams`), how they turn
the verifier's logits into the target distribution p of every tree node (:func:`target_probs`),
and how to decide a tree against those distributions so that the committed tokens are
distributed exactly as plain sampling from p, token after token (:func:`sample_tree`). What it
does not know: where drafts come from, the model, the KV cache. It needs numpy (the rule) and
torch (only :func:`target_probs`, to read logits where the verifier left them).

**The target distribution p** of a node (:func:`target_probs`), from its logits z:

* temperature T = 0: greedy; p is one-hot on argmax(z) (the rule below then accepts exactly the
  child that equals the argmax and its bonus is the argmax: greedy verification);
* T > 0: p = softmax(z / T); then top-p (nucleus) with 0 < top_p <= 1: sort p descending
  (ties keep the lower token id first), keep the smallest head whose cumulative mass reaches
  top_p (the token that crosses top_p is kept), zero the rest and renormalise. top_p = 1 keeps
  every token.

**Why the textbook rule does not apply.** Speculative sampling accepts a draft x with
probability min(1, p(x) / q(x)), where q is the distribution the drafter sampled x from. Here
the drafts are deterministic (copied text, retrieved continuations, argmax rollouts): q is a
point mass on x, so the ratio is p(x) / 1 = p(x), and on rejection the residual
max(p - q, 0) is p with x removed.

**The rule** (:func:`sample_tree`): one draw per committed token, taken in order from the
request's generator exactly as plain sampling takes one per token. A draw is one standard
exponential E(v) per vocabulary token, and the token it picks from p is
t* = argmax over v of p(v) / E(v) (:func:`pick`: an exponential race, the Gumbel-max trick in
another form: P(t* = x) = p(x)). At an accepted node with target distribution p:

1. take the position's draw and let t* be the token it picks from p: the token plain sampling
   picks with the same draw (:func:`sample_from`, which the sampled AR baseline uses);
2. its children are taken in a fixed order (tree index order), siblings that carry the same
   token merged into one candidate (their subtrees pooled). A candidate x is accepted iff
   x == t*: x is committed and the walk continues at x with x's own p and the next draw;
3. when no candidate is t* (or the node is a leaf), t* is the bonus token and the cycle ends.

Why it is exact, and more: whatever the tree, the token committed at every position is t*, the
token plain sampling picks there with the same draw. So a request decoded by any drafter, from
any store, commits token for token what plain sampling with the same seed commits
(:func:`oilbird.sampled.sampled_autoregressive`): lossless in the same checkable sense as greedy,
and in distribution because each draw is fresh (P(t* = x) = p(x) given the prefix).

Why a race and not one uniform through the inverse CDF: the tree forward and a one-token forward
round the logits differently (~1e-6), and the inverse CDF in token-id order turns that into
another token wherever u lands in the flat tail (measured: at T = 1, 2 of 8 built-in requests
diverged within 16 tokens). The race's winner changes only when the two best p / E tie to within
rounding (every sampled bench and test run since has been lossless; bf16 or a GPU rounds more
coarsely, so there a mismatch at a near tie is more likely, as for greedy); it costs ~0.6 ms
per token at 49k tokens.

The textbook residual rule is what the same walk looks like one candidate at a time, which is
what the views show: given that the candidates tried before x were not t*, x is accepted with
probability r(x) / m, where r is p with those candidates removed and m its mass (1.0 before any
rejection); when all are rejected the bonus is distributed as r / m. The per-try record (token,
r(x) / m, m, the token drawn) keeps that meaning. The expected number of accepted tokens is the
textbook rule's: each candidate is accepted with probability p(x).

**Worked example.** p = {a: 0.5, b: 0.3, c: 0.2}; the node has children b then a.

* the position's draw picks t* = c (it does with probability 0.2).
* try b: acceptance probability 0.3 of mass 1.0; b is not c: rejected. r = {a: 0.5, c: 0.2}, m = 0.7.
* try a: 0.5 / 0.7 = 0.714; not c: rejected. r = {c: 0.2}, m = 0.2.
* bonus: c (from r / m, c with probability 1).

Over all draws: b with 0.3, a with 0.5, c with 0.2: exactly p, whichever children the tree had.
The record is what the views show: ``b: 0.300 of mass 1.000 -> rejected``.

Negative controls (tests/test_sampling.py): accepting a child only when it is the argmax of p,
or accepting x with p(x) but then sampling the bonus from p instead of the residual, both
change the distribution; the distribution test must and does reject them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import shown
from .tree import root_path


class SamplingError(ValueError):
    """Bad sampling settings (temperature, top-p, seed). The message is one line."""


@dataclass(frozen=True)
class SamplingParams:
    """A request's sampling settings. ``temperature == 0`` is greedy (the default)."""
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        check_sampling(self.temperature, self.top_p, self.seed)
        # stored as plain float / int (numpy scalars too), so equality, JSON and hashing agree
        object.__setattr__(self, "temperature", float(self.temperature))
        object.__setattr__(self, "top_p", float(self.top_p))
        object.__setattr__(self, "seed", int(self.seed))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def describe(self) -> str:
        return "greedy" if self.greedy else f"T={self.temperature:g}, top-p={self.top_p:g}, seed={self.seed}"


def check_sampling(temperature, top_p, seed) -> None:
    """Raise :class:`SamplingError` (one line) unless T is 0 or a number in [MIN_TEMPERATURE, inf),
    0 < top_p <= 1 and seed is a whole number. Text and booleans are not numbers here (parse
    text first: :func:`parse_seed`, ``float``)."""
    t = _number(temperature, "temperature must be a number >= 0")
    if not np.isfinite(t) or t < 0:
        raise SamplingError(f"temperature must be a number >= 0 (0 = greedy), not {temperature!r}")
    if 0 < t < MIN_TEMPERATURE:
        raise SamplingError(f"temperature {temperature!r} is too small to divide logits by: use 0 for "
                            f"greedy or at least {MIN_TEMPERATURE:g}")
    q = _number(top_p, "top-p must be a number in (0, 1]")
    if not (0 < q <= 1):
        raise SamplingError(f"top-p must be in (0, 1] (1 keeps every token), not {top_p!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise SamplingError(f"seed must be a whole number, not {seed!r}")


# the smallest temperature taken (vLLM, too, draws nothing below 1e-5): a smaller one is greedy in
# all but name, and one small enough makes z / T infinite and the softmax NaN; it is refused
MIN_TEMPERATURE = 1e-5


def _number(x, why: str) -> float:
    if isinstance(x, (bool, str, bytes)) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise SamplingError(f"{why}, not {x!r}")
    return float(x)


def parse_seed(text: str) -> int:
    """A seed from the command line or a text box: a whole number, else :class:`SamplingError`."""
    try:
        return int(str(text).strip())
    except ValueError:
        raise SamplingError(f"seed must be a whole number, not {shown(text)}") from None


def request_rng(params: SamplingParams, request_id: str) -> np.random.Generator:
    """The generator one request decodes with: seeded by (seed, request id). Every committed token
    consumes exactly one draw (:func:`sample_tree`), so a request's output depends on the seed
    and its own id only (and the model's rounding, at near ties): not on the drafter, the store
    or what was decoded before it."""
    import zlib
    # the whole seed, one entropy per seed: a seed in 0..2**32-1 seeds as it always did; a larger
    # one is not cut to 32 bits, and a negative one (entropy must be >= 0) gets a third word
    seed, rid = int(params.seed), zlib.crc32(str(request_id).encode())
    return np.random.default_rng([seed, rid] if seed >= 0 else [-seed, rid, 1])


def target_probs(logits, temperature: float, top_p: float = 1.0) -> np.ndarray:
    """The target distribution p per row of ``logits`` ([..., V], torch tensor or array), as
    float64 numpy (see the module doc: temperature 0 = one-hot argmax; else softmax(z / T)
    then top-p). Every row sums to 1."""
    import torch
    z = torch.as_tensor(logits).detach().to("cpu", torch.float64)
    if temperature == 0:
        p = torch.zeros_like(z)
        p.scatter_(-1, z.argmax(-1, keepdim=True), 1.0)
        return p.numpy()
    z = z / float(temperature)
    p = torch.softmax(z - z.amax(-1, keepdim=True), dim=-1)   # shifted: a -inf or huge logit stays finite
    if top_p < 1.0:
        sp, order = torch.sort(p, dim=-1, descending=True, stable=True)
        before = torch.cumsum(sp, dim=-1) - sp          # mass of the tokens ranked above
        keep = before < top_p                           # the token crossing top_p is kept
        sp = torch.where(keep, sp, torch.zeros_like(sp))
        p = torch.zeros_like(p).scatter_(-1, order, sp)
        p = p / p.sum(-1, keepdim=True)
    return p.numpy()


def draw(rng: np.random.Generator, n: int) -> np.ndarray:
    """One position's draw over ``n`` tokens: a standard exponential per token (never 0)."""
    return np.maximum(rng.standard_exponential(n), np.finfo(np.float64).tiny)


def pick(p: np.ndarray, race: np.ndarray) -> int:
    """The token the draw ``race`` (:func:`draw`) picks from the (possibly unnormalised) weights
    ``p``: argmax p / race, so P(token x) = p(x) / sum p. Plain sampling and the tree rule both
    pick with it."""
    total = float(np.sum(p))
    if not np.isfinite(total) or total <= 0 or (p < 0).any():
        raise SamplingError(f"cannot sample from these weights (total {total:g}): the logits or the "
                            f"temperature give no distribution")
    return int(np.argmax(p / race))


def sample_from(p: np.ndarray, rng: np.random.Generator) -> int:
    """One token from the weights ``p`` with the next draw of ``rng`` (:func:`pick`)."""
    return pick(p, draw(rng, len(p)))


@dataclass
class Tried:
    """One candidate the rule tried: what decided it (for the views)."""
    node: int             # tree node (accepted: the one on the accepted path; else the lowest twin)
    token: int
    prob: float           # r(x) / m: its acceptance probability given the earlier rejections
    residual_mass: float  # m: the residual's mass when it was tried (1.0 = nothing rejected yet)
    drawn: int            # the token the position's draw picked from p (shared by the node's tries)
    accepted: bool        # token == drawn


@dataclass
class SampleVerdict:
    """What :func:`sample_tree` decided: the accepted root path (node indices, root first), the
    bonus token, the residual mass it was drawn from, and every try in order."""
    accepted: list[int]
    bonus: int
    tried: list[Tried] = field(default_factory=list)
    bonus_mass: float = 1.0   # the residual's mass the bonus was drawn from (1.0: p itself)


def _children(tokens, parents) -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for i in range(1, len(parents)):
        kids.setdefault(int(parents[i]), []).append(i)
    return kids


def sample_tree(tokens, parents, probs, rng: np.random.Generator) -> SampleVerdict:
    """Decide a draft tree under sampling (the rule of the module doc).

    tokens, parents: the tree (node 0 = root, parents before children). probs: per node the
    target distribution p of the token that follows it (``probs[i]``: a 1-D float array summing
    to 1, e.g. a row of :func:`target_probs`; only rows of visited nodes are read). rng: the
    request's numpy Generator (the only source of randomness).

    >>> p = np.array([[0.0, 0.5, 0.3, 0.2], [0.1, 0.0, 0.9, 0.0], [1.0, 0.0, 0.0, 0.0]])
    >>> v = sample_tree([0, 2, 1], [-1, 0, 0], p, np.random.default_rng(0))
    >>> [(t.token, round(t.prob, 3), t.residual_mass) for t in v.tried][:1]
    [(2, 0.3, 1.0)]
    """
    kids = _children(tokens, parents)
    group = [0]                  # the accepted node and its merged twins (same context)
    tried: list[Tried] = []
    while True:
        p = np.asarray(probs[group[0]], dtype=np.float64)
        drawn = sample_from(p, rng)          # this position's one draw, as plain sampling's
        # candidates: children of every twin, in index order, merged by token
        order: list[int] = []
        by_token: dict[int, list[int]] = {}
        for g in group:
            for c in kids.get(g, ()):
                t = int(tokens[c])
                if t not in by_token:
                    by_token[t] = []
                    order.append(t)
                by_token[t].append(c)
        mass, nxt = 1.0, None
        for t in order:
            ok = t == drawn
            tried.append(Tried(min(by_token[t]), t, float(p[t]) / mass if mass > 0 else 0.0, mass, drawn, ok))
            if ok:
                nxt = sorted(by_token[t])
                break
            mass = max(0.0, mass - float(p[t]))
        if nxt is None:
            path = root_path(parents, group[0])
            # merged twins: which twin the path went through is known only below it; an accepted
            # try is recorded on the path's node (the k-th accepted try is the path's node k)
            for node, t in zip(path[1:], [t for t in tried if t.accepted]):
                t.node = node
            return SampleVerdict(path, drawn, tried, mass)
        group = nxt


def decisions_per_node(decisions: list[dict], n: int) -> tuple[list[float | None], list[float | None]]:
    """Per tree node of a sampled verdict: the probability that decided it and the residual mass
    when it was tried (None: never tried), for :class:`oilbird.trace.CycleTrace`."""
    prob: list[float | None] = [None] * n
    mass: list[float | None] = [None] * n
    for d in decisions:
        prob[d["node"]], mass[d["node"]] = round(float(d["prob"]), 6), round(float(d["residual_mass"]), 6)
    return prob, mass
