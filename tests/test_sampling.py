"""Proof by test that tree speculative sampling is lossless in distribution (oilbird.sampling).

For several prefixes and draft trees (children that carry most of p, almost none of it, or
tokens top-p removed; merged twins), the first K tokens (K = 2 on the tiny mock model, K = 3 on
small hand-made models) that one speculative cycle followed by plain sampling commits are
drawn N = 20,000 times and compared with the exact distribution of plain sampling (the
products of the model's own next-token probabilities) by Pearson's chi-square test at a fixed
significance ALPHA. Two deliberately wrong rules (negative controls) must fail the same test.

Everything is seeded (numpy Generators), so each verdict is deterministic. The model is never
run N times: its next-token distributions are computed once per distinct context and memoised;
only the rule runs per draw.

Critical values: the Wilson-Hilferty approximation (chi2 quantile ~= df (1 - 2/(9df) +
z sqrt(2/(9df)))^3, z the standard normal quantile); at ALPHA = 0.001 it is within 2% of the
exact quantile for df >= 3 (slightly above it: conservative) and within 1% for df >= 10;
checked against scipy where scipy is installed.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from oilbird.sampling import (MIN_TEMPERATURE, SampleVerdict, SamplingError, SamplingParams, check_sampling,
                              sample_from, sample_tree, target_probs)
from oilbird.tree import greedy_accept

N = 20_000
ALPHA = 1e-3
Z_1_MINUS_ALPHA = 3.090232306167813     # standard normal quantile at 1 - ALPHA


def chi2_critical(df: int, z: float = Z_1_MINUS_ALPHA) -> float:
    """Upper quantile of chi-square(df) by Wilson-Hilferty (see the module doc)."""
    a = 2.0 / (9.0 * df)
    return df * (1.0 - a + z * math.sqrt(a)) ** 3


def chi_square(counts: dict, expected_p: dict, n: int) -> tuple[float, int]:
    """Pearson's statistic of ``counts`` (outcome -> count) against the exact probabilities
    ``expected_p`` (outcome -> p). Outcomes with expected count < 5 are pooled into one cell
    (with the unseen outcomes' mass); returns (statistic, degrees of freedom)."""
    kept = {k: p for k, p in expected_p.items() if p * n >= 5}
    other_p = max(0.0, 1.0 - sum(kept.values()))
    cells_obs = [counts.get(k, 0) for k in kept]
    cells_exp = [p * n for p in kept.values()]
    other_obs = n - sum(cells_obs)
    if other_p * n >= 5:
        cells_obs.append(other_obs)
        cells_exp.append(other_p * n)
    else:                 # too little mass to stand alone: pool it into the smallest kept cell
        j = int(np.argmin(cells_exp))
        cells_obs[j] += other_obs
        cells_exp[j] += other_p * n
    obs, exp = np.array(cells_obs, float), np.array(cells_exp, float)
    return float(((obs - exp) ** 2 / exp).sum()), len(obs) - 1


# --- models: context (tuple of ids) -> next-token distribution, memoised -----------------------

class TableModel:
    """A small hand-made model over V tokens: the logits of a context are a fixed pseudo-random
    function of it (so every context has its own distribution), then temperature and top-p."""

    def __init__(self, vocab: int, temperature: float, top_p: float = 1.0, sharp: float = 2.0, seed: int = 0):
        self.V, self.T, self.top_p, self.sharp, self.seed = vocab, temperature, top_p, sharp, seed
        self.memo: dict[tuple, np.ndarray] = {}

    def __call__(self, ctx: tuple) -> np.ndarray:
        if ctx not in self.memo:
            rng = np.random.default_rng([self.seed, *ctx])
            z = torch.tensor(rng.standard_normal(self.V) * self.sharp)
            self.memo[ctx] = target_probs(z, self.T, self.top_p)
        return self.memo[ctx]


class TinyLM:
    """The tiny mock Llama of tests/conftest.py as a next-token distribution, memoised; the
    distributions after every one-token extension of a context come from one batched forward."""

    def __init__(self, lm, temperature: float, top_p: float = 1.0):
        self.model, self.T, self.top_p = lm.model, temperature, top_p
        self.V = int(lm.model.config.vocab_size)
        self.memo: dict[tuple, np.ndarray] = {}

    @torch.inference_mode()
    def expand(self, ctx: tuple) -> None:
        """Memoise p(ctx + (a,)) for every token a in one forward."""
        x = torch.tensor([list(ctx) + [a] for a in range(self.V)])
        logits = self.model(input_ids=x).logits[:, -1]
        for a, row in enumerate(target_probs(logits, self.T, self.top_p)):
            self.memo[ctx + (a,)] = row

    @torch.inference_mode()
    def __call__(self, ctx: tuple) -> np.ndarray:
        if ctx not in self.memo:
            logits = self.model(input_ids=torch.tensor([list(ctx)])).logits[0, -1]
            self.memo[ctx] = target_probs(logits, self.T, self.top_p)
        return self.memo[ctx]


class NodeProbs:
    """``probs[i]`` for :func:`sample_tree`: p at tree node i = model(prefix + path to i),
    computed only for the nodes a draw visits."""

    def __init__(self, model, prefix: tuple, tokens, parents):
        self.model, self.ctx = model, []
        for i, par in enumerate(parents):
            self.ctx.append(prefix if i == 0 else self.ctx[par] + (tokens[i],))
        self.memo: dict[int, np.ndarray] = {}

    def __getitem__(self, i: int) -> np.ndarray:
        if i not in self.memo:
            self.memo[i] = self.model(self.ctx[i])
        return self.memo[i]


# --- one draw of the first K tokens ------------------------------------------------------------

def draw(rule, model, prefix: tuple, tree, probs: NodeProbs, k: int, rng) -> tuple:
    """One cycle of ``rule`` on ``tree`` (rooted at the last prefix token), then plain sampling
    until K tokens: the K-token outcome."""
    tokens, parents = tree
    v = rule(tokens, parents, probs, rng)
    out = [tokens[i] for i in v.accepted[1:]] + [v.bonus]
    while len(out) < k:
        out.append(sample_from(model(prefix + tuple(out)), rng))
    return tuple(out[:k])


def exact(model, prefix: tuple, k: int, floor: float) -> dict:
    """The exact distribution of plain sampling's first K tokens (outcomes below ``floor`` are
    dropped: the chi-square pools them with the unseen mass)."""
    out = {(): 1.0}
    for _ in range(k):
        nxt = {}
        for seq, pr in out.items():
            p = model(prefix + seq)
            for t in np.flatnonzero(p * pr >= floor):
                nxt[seq + (int(t),)] = pr * float(p[t])
        out = nxt
    return out


def run_case(rule, model, prefix, tree, k, seed, n=N):
    rng = np.random.default_rng(seed)
    probs = NodeProbs(model, prefix, *tree)
    counts: dict[tuple, int] = {}
    for _ in range(n):
        o = draw(rule, model, prefix, tree, probs, k, rng)
        counts[o] = counts.get(o, 0) + 1
    expected = exact(model, prefix, k, floor=0.5 / n)
    return chi_square(counts, expected, n)


# --- negative controls: two wrong rules ------------------------------------------------------

def _walk(tokens, parents, probs, rng, accepts) -> SampleVerdict:
    """Descend from the root into the first child ``accepts(token, p)`` takes; at the node where
    none is taken, sample the bonus from p itself (what both wrong rules below do)."""
    kids: dict[int, list[int]] = {}
    for i in range(1, len(parents)):
        kids.setdefault(parents[i], []).append(i)
    node, path = 0, [0]
    while True:
        p = probs[node]
        nxt = next((c for c in kids.get(node, ()) if accepts(tokens[c], p)), None)
        if nxt is None:
            return SampleVerdict(path, sample_from(p, rng))
        node = nxt
        path.append(node)


def argmax_rule(tokens, parents, probs, rng) -> SampleVerdict:
    """WRONG: accept a child iff it is the argmax of p (greedy verification), then sample the bonus."""
    return _walk(tokens, parents, probs, rng, lambda x, p: x == int(np.argmax(p)))


def no_residual_rule(tokens, parents, probs, rng) -> SampleVerdict:
    """WRONG: accept child x with p(x), but after rejections sample the bonus from p itself."""
    return _walk(tokens, parents, probs, rng, lambda x, p: rng.random() < p[x])


# --- trees --------------------------------------------------------------------------------------

def ranked(model, ctx):
    return [int(t) for t in np.argsort(-model(ctx), kind="stable")]


def trees_for(model, prefix):
    """Named trees rooted at the prefix's last token: children that carry most of p, almost
    none of it, twins, and a deep chain that follows the model's top tokens."""
    r = ranked(model, prefix)
    a, b, c = r[0], r[1], r[2]
    rare = r[-1]                               # the least likely token (p ~ 0, or 0 under top-p)
    a2 = ranked(model, prefix + (a,))
    root = prefix[-1]
    return {
        # most of p below the root, and below the first child
        "top2-deep": ([root, a, b, a2[0], a2[1]], [-1, 0, 0, 1, 1]),
        # a child that carries almost none of p, tried first
        "rare-first": ([root, rare, a, a2[0]], [-1, 0, 0, 2]),
        # order matters for the record, not for the distribution: second-ranked tried first
        "b-then-a": ([root, b, a, c], [-1, 0, 0, 0]),
        # twin siblings (same token under the root) with different children: merged first
        "twins": ([root, a, a, a2[0], a2[1]], [-1, 0, 0, 1, 2]),
    }


# --- the tests -----------------------------------------------------------------------------------

def test_critical_value_matches_scipy_where_installed():
    stats = pytest.importorskip("scipy.stats")
    assert chi2_critical(3) == pytest.approx(stats.chi2.ppf(1 - ALPHA, 3), rel=0.02)
    for df in (10, 50, 300):
        assert chi2_critical(df) == pytest.approx(stats.chi2.ppf(1 - ALPHA, df), rel=0.01)


def test_chi_square_rejects_a_visible_bias_and_accepts_a_fair_die():
    rng = np.random.default_rng(1)
    p = {(i,): 1 / 6 for i in range(6)}
    fair = rng.integers(0, 6, N)
    counts = {(i,): int((fair == i).sum()) for i in range(6)}
    stat, df = chi_square(counts, p, N)
    assert stat < chi2_critical(df)
    loaded = rng.choice(6, N, p=[0.18, 0.1633, 0.1633, 0.1667, 0.1633, 0.1634])
    counts = {(i,): int((loaded == i).sum()) for i in range(6)}
    stat, df = chi_square(counts, p, N)
    assert stat > chi2_critical(df)


TABLE_CASES = [  # (vocab, temperature, top_p, prefix)
    (6, 1.0, 1.0, (0, 1)),
    (6, 0.7, 1.0, (2, 3, 4)),
    (8, 1.0, 0.8, (5,)),
    (5, 1.5, 1.0, (1, 1, 1)),
]


@pytest.mark.parametrize("case", range(len(TABLE_CASES)))
@pytest.mark.parametrize("tree_name", ["top2-deep", "rare-first", "b-then-a", "twins"])
def test_three_tokens_jointly_equal_plain_sampling_on_small_models(case, tree_name):
    vocab, t, top_p, prefix = TABLE_CASES[case]
    model = TableModel(vocab, t, top_p, seed=case)
    tree = trees_for(model, prefix)[tree_name]
    stat, df = run_case(sample_tree, model, prefix, tree, k=3, seed=100 + case)
    assert df >= 5
    assert stat < chi2_critical(df), (tree_name, TABLE_CASES[case], stat, df)


TINY_CASES = [  # (temperature, top_p, prefix)
    (0.2, 1.0, (1, 75, 76, 77)),
    (0.3, 0.9, (1, 200, 13)),
    (0.5, 0.95, (1, 75, 76, 77)),
]   # the tiny model's random weights make it flat above T = 0.5: no 2-token cell would reach 5 draws


@pytest.mark.parametrize("case", range(len(TINY_CASES)))
@pytest.mark.parametrize("tree_name", ["top2-deep", "rare-first", "twins"])
def test_two_tokens_jointly_equal_plain_sampling_on_the_tiny_model(tiny_lm, case, tree_name):
    t, top_p, prefix = TINY_CASES[case]
    model = TinyLM(tiny_lm, t, top_p)
    model.expand(prefix)
    tree = trees_for(model, prefix)[tree_name]
    top = model(prefix)[tree[0][1]]
    if tree_name == "top2-deep":            # the tree's first child carries much of p...
        assert top > 0.2
    if tree_name == "rare-first":           # ... or almost none of it
        assert top < 1e-3
    stat, df = run_case(sample_tree, model, prefix, tree, k=2, seed=200 + case)
    assert df >= 5
    assert stat < chi2_critical(df), (tree_name, TINY_CASES[case], stat, df)


@pytest.mark.parametrize("rule", [argmax_rule, no_residual_rule], ids=["argmax", "no-residual"])
@pytest.mark.parametrize("case", range(2))
def test_negative_controls_fail_the_same_test(tiny_lm, rule, case):
    """A test that cannot fail proves nothing: two wrong rules, on trees whose children carry
    much of p, must be rejected by the very same statistic and critical value."""
    if case == 0:
        model, prefix, k = TableModel(6, 1.0, 1.0, seed=0), (0, 1), 3
    else:
        t, top_p, prefix = TINY_CASES[0]
        model, k = TinyLM(tiny_lm, t, top_p), 2
        model.expand(prefix)
    tree = trees_for(model, prefix)["top2-deep"]
    stat, df = run_case(rule, model, prefix, tree, k=k, seed=300 + case)
    assert stat > chi2_critical(df), (rule.__name__, stat, df)
    stat_ok, df_ok = run_case(sample_tree, model, prefix, tree, k=k, seed=300 + case)
    assert stat_ok < chi2_critical(df_ok)


def test_worked_example_of_the_module_doc():
    """p = {a: .5, b: .3, c: .2}, children b then a: the exact tries and outcome frequencies."""
    p = np.array([[0.5, 0.3, 0.2], [1, 0, 0], [1, 0, 0]])   # tokens a=0, b=1, c=2
    rng = np.random.default_rng(7)
    counts = np.zeros(3)
    first = None
    for _ in range(N):
        v = sample_tree([2, 1, 0], [-1, 0, 0], p, rng)
        tok = 1 if v.accepted[1:] == [1] else 0 if v.accepted[1:] == [2] else v.bonus
        counts[tok] += 1
        if first is None and not v.tried[0].accepted and not v.tried[1].accepted:
            first = v
    assert [round(t.prob, 3) for t in first.tried] == [0.3, 0.714]
    assert [round(t.residual_mass, 3) for t in first.tried] == [1.0, 0.7]
    assert first.bonus == 2 and first.bonus_mass == pytest.approx(0.2)
    stat, df = chi_square({(i,): counts[i] for i in range(3)}, {(0,): .5, (1,): .3, (2,): .2}, N)
    assert stat < chi2_critical(df)


def test_temperature_zero_is_greedy_verification():
    """One-hot p: the rule accepts exactly greedy_accept's path, and its bonus is the argmax."""
    rng = np.random.default_rng(0)
    for trial in range(200):
        n = int(rng.integers(1, 12))
        parents = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
        tokens = [int(t) for t in rng.integers(0, 4, n)]
        logits = rng.standard_normal((n, 4))
        probs = target_probs(torch.tensor(logits), 0.0)
        v = sample_tree(tokens, parents, probs, rng)
        acc, bonus = greedy_accept(tokens, parents, logits.argmax(1).tolist())
        if len(set(zip(parents, tokens))) == n:   # twins: greedy_accept ignores the later twin's children
            assert (v.accepted, v.bonus) == (acc, bonus), trial


def test_target_probs_temperature_and_top_p():
    z = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    p = target_probs(z, 1.0)
    assert p.sum() == pytest.approx(1.0) and p[0, 0] > p[0, 1] > p[0, 2] > p[0, 3]
    cold, hot = target_probs(z, 0.5)[0, 0], target_probs(z, 2.0)[0, 0]
    assert cold > p[0, 0] > hot
    full = torch.softmax(z[0].double(), 0).numpy()                # .644 .237 .087 .032
    q = target_probs(z, 1.0, top_p=0.7)                           # .644 < .7: the 2nd crosses it
    assert (q[0, 2:] == 0).all() and q[0, :2] == pytest.approx(full[:2] / full[:2].sum())
    assert (target_probs(z, 1.0, top_p=0.5)[0] == [1, 0, 0, 0]).all()
    assert (target_probs(z, 0.0)[0] == [1, 0, 0, 0]).all()


def test_same_seed_same_verdict():
    p = target_probs(torch.randn(5, 7, generator=torch.Generator().manual_seed(0)), 1.0)
    tree = ([0, 1, 2, 3, 4], [-1, 0, 0, 1, 1])
    a = [sample_tree(*tree, p, np.random.default_rng(3)) for _ in range(2)]
    assert a[0] == a[1]


@pytest.mark.parametrize("t,top_p,seed,msg", [
    (-0.1, 1.0, 0, "temperature"), (float("nan"), 1.0, 0, "temperature"), ("hot", 1.0, 0, "temperature"),
    ("0.7", 1.0, 0, "temperature"), (True, 1.0, 0, "temperature"), (1e-320, 1.0, 0, "too small"),
    (float("inf"), 1.0, 0, "temperature"), (1.0, "0.9", 0, "top-p"), (1.0, True, 0, "top-p"),
    (1.0, 0.0, 0, "top-p"), (1.0, 1.5, 0, "top-p"), (1.0, 1.0, 1.5, "seed"), (1.0, 1.0, "7", "seed"),
    (1.0, 1.0, True, "seed")])
def test_bad_settings_are_one_line(t, top_p, seed, msg):
    with pytest.raises(SamplingError, match=msg) as e:
        check_sampling(t, top_p, seed)
    assert "\n" not in str(e.value)
    with pytest.raises(SamplingError):
        SamplingParams(t, top_p, seed)


def test_settings_are_stored_as_plain_numbers():
    p = SamplingParams(np.float32(0.5), np.float64(1.0), np.int64(3))
    assert (type(p.temperature), type(p.top_p), type(p.seed)) == (float, float, int)
    assert p == SamplingParams(0.5, 1.0, 3) and SamplingParams(1, 1, 0).temperature == 1.0


def test_weights_that_are_no_distribution_are_one_clear_error():
    rng = np.random.default_rng(0)
    for bad in ([np.nan, 0.5], [0.0, 0.0], [np.inf, 1.0], [-0.1, 1.1]):
        with pytest.raises(SamplingError, match="cannot sample"):
            sample_from(np.array(bad), rng)


def test_extreme_logits_and_the_smallest_temperature_give_a_distribution():
    z = torch.tensor([[3e4, 0.0, -float("inf"), 2.9e4], [0.0, 1e-6, 0.0, 0.0]])
    for t in (MIN_TEMPERATURE, 1e-3, 1.0):
        p = target_probs(z, t)
        assert np.isfinite(p).all() and p.sum(1) == pytest.approx([1.0, 1.0]) and (p[0, 2] == 0)
    assert target_probs(z, MIN_TEMPERATURE)[1].argmax() == 1      # a 1e-6 gap at T = 1e-5: decided


@pytest.mark.parametrize("case", range(len(TABLE_CASES)))
def test_a_cycle_commits_what_plain_sampling_draws_with_the_same_generator(case):
    """The rule's stronger property (module doc): whatever the tree, the tokens a cycle commits
    are the ones plain sampling draws with the same generator, one draw per token; so a
    speculative request is checkable token for token against plain sampling."""
    vocab, t, top_p, prefix = TABLE_CASES[case]
    model = TableModel(vocab, t, top_p, seed=case)
    rng_trees = np.random.default_rng(case)
    accepted_any = 0
    for trial in range(300):
        n = int(rng_trees.integers(1, 10))
        parents = [-1] + [int(rng_trees.integers(0, i)) for i in range(1, n)]
        tokens = [prefix[-1]] + [int(x) for x in rng_trees.integers(0, vocab, n - 1)]
        v = sample_tree(tokens, parents, NodeProbs(model, prefix, tokens, parents), np.random.default_rng(trial))
        out = [tokens[i] for i in v.accepted[1:]] + [v.bonus]
        plain, rng = [], np.random.default_rng(trial)
        while len(plain) < len(out):
            plain.append(sample_from(model(prefix + tuple(plain)), rng))
        assert out == plain, (trial, tokens, parents)
        accepted_any += len(v.accepted) > 1
        for tr in v.tried:                  # what the views read: the tried node is on the tree
            assert tokens[tr.node] == tr.token and (tr.node in v.accepted) == tr.accepted
    assert accepted_any > 30                # the trees did get tokens accepted


def test_merged_twins_record_the_node_the_accepted_path_takes():
    """Twins 1 and 2 (token 1) whose children carry the same token 3 in reverse index order
    (node 3 under twin 2, node 4 under twin 1): the path goes 0, 2, 3, and both accepted tries are
    recorded on the path's nodes (not on twin 1, nor on node 4, the first child met)."""
    tokens, parents = [0, 1, 1, 3, 3], [-1, 0, 0, 2, 1]
    p = np.zeros((5, 4))
    p[0, 1] = p[1, 3] = p[2, 3] = p[3, 0] = p[4, 0] = 1.0
    v = sample_tree(tokens, parents, p, np.random.default_rng(0))
    assert v.accepted == [0, 2, 3] and v.bonus == 0
    assert [(t.node, t.accepted) for t in v.tried] == [(2, True), (3, True)]
