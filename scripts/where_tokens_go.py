"""Where a drafter's tokens go in a replay: accepted, held by a candidate the tree cut, or absent.

    python scripts/where_tokens_go.py replay --data agent-transcripts --limit 20 --methods oilbird \\
        --cache runs/tcache --out runs/where --force

Runs ``python -m oilbird replay`` with the arguments given (one method) and, per drafting cycle,
compares three lengths against the recorded continuation (capped at ``budget - 1``):

* **accepted**: what the tree got accepted;
* **best candidate**: the longest right prefix among every chain any source proposed this cycle,
  before the node budget cut them (the spine pass's chains, the semantic and rejected-pool
  chains, the adjacency branches): what a perfect choice among the drafter's own candidates
  would have got;
* **copy**: the longest prefix that occurs verbatim anywhere in the context or an earlier
  turn's output (the copy oracle's rule, docs/results.md), and how many context tokens before
  that occurrence equal ours (0: not even the root token precedes it, so no context-keyed
  drafter can find it; 1: only the root).

It prints the tokens per cycle each would give, the tokens between best candidate and accepted
by the source whose chain held them (that chain always got nodes down to where acceptance
ended, and no further: the budget went elsewhere), and the tokens between copy and best
candidate by that context agreement. Then, for the retrieved neighbours, the mean right prefix
of their continuations by context agreement and by similarity; and, for a method with learned
acceptance rates, each cell's rate against how often its nodes were accepted. It wraps four
methods of the drafter and the replay judge to look; what is drafted and committed is unchanged.
The figures of docs/results.md ("Context agreement") came from it.
"""
from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oilbird import decoding, drafter  # noqa: E402
from oilbird.__main__ import main as oilbird_main  # noqa: E402
from oilbird.trace import common_prefix  # noqa: E402

_cycle: dict = {}
_stats: Counter = Counter()
_earlier: list[str] = []          # earlier turns' outputs, one string each (chr(token + 1))
_neighbour: defaultdict = defaultdict(lambda: [0, 0])      # bin -> [neighbours, right tokens]
_rates: defaultdict = defaultdict(lambda: [0, 0.0, 0])     # cell -> [tested, predicted sum, accepted]
REACH = 16                        # tokens of a neighbour's continuation judged (the trace keeps as many)


def _text(tokens) -> str:
    return "".join(chr(int(t) + 1) for t in tokens)


def _path(tree, node: int) -> list[int]:
    out = []
    while node > 0:
        out.append(tree.tokens[node])
        node = tree.parents[node]
    return out[::-1]


def _wrap() -> None:
    ask, branches, draft, verdict = (drafter.Drafter._ask, drafter.Drafter._branches, drafter.Drafter.draft,
                                     decoding.Replay.verdict)

    def _ask(source, ctx, budget, info):
        p = ask(source, ctx, budget, info)
        for c in list(p.chains) + list(p.looked_up):
            _cycle["chains"].append((source.name, _path(ctx.tree, c.attach) + list(c.tokens)))
            if source.retrieves:      # a neighbour: its agreement, similarity, whole continuation
                _cycle["neighbours"].append((getattr(c, "match", 0), c.score, c.meta["proposed"] + (c.meta.get("withheld") or [])))
        return p

    def _branches(self, source, ctx):
        out = branches(self, source, ctx)
        for name, c in out:
            _cycle["chains"].append((name, _path(ctx.tree, c.attach) + list(c.tokens)))
        return out

    def _draft(self, context, request_id, query_state):
        _cycle.update(chains=[], neighbours=[], context=context, cap=self.cfg.budget - 1, rates=self.rates)
        tree, info = draft(self, context, request_id, query_state)
        if self.rates is not None:    # each node's learned rate now, before this verdict teaches it
            depths = tree.depths()
            _cycle["rate"] = [self.rates.rate(self.rates.node_cell(tree, i, depths[i])) if i else 1.0
                              for i in range(len(tree))]
        return tree, info

    def _verdict(self, v, cache, prefix_len, tree, before):
        out = verdict(self, v, cache, prefix_len, tree, before)
        if _cycle.get("recording") is not self.recording:
            if _cycle.get("recording") is not None:
                _earlier.append(_text(_cycle["recording"]))
            _cycle["recording"] = self.recording
        _count(tree, out, self.recording[before: before + _cycle["cap"]])
        _neighbours(self.recording[before: before + REACH])
        if _cycle["rates"] is not None:
            _calibration(tree, out)
        return out

    drafter.Drafter._ask = staticmethod(_ask)
    drafter.Drafter._branches = _branches
    drafter.Drafter.draft = _draft
    decoding.Replay.verdict = _verdict


def _count(tree, verdict, truth: list[int]) -> None:
    acc = len(verdict.accepted) - 1
    best = max(_cycle["chains"], key=lambda c: common_prefix(c[1], truth), default=None)
    cand = max(acc, common_prefix(best[1], truth)) if best else acc
    copy, agree = _copy(truth)
    copy = max(copy, cand)
    _stats.update(cycles=1, accepted=acc, candidate=cand, copy=copy)
    if cand > acc:
        # the accepted path is the right prefix, so the chain's nodes end exactly where it ends:
        # the budget went elsewhere
        _stats[f"candidate over accepted, the chain of: {best[0]}"] += cand - acc
    if copy > cand:
        _stats[f"copy over candidate: context agreement {agree}"] += copy - cand


def _bin(x: float, edges, names) -> str:
    return next((n for e, n in zip(edges, names) if x >= e), names[-1])


def _neighbours(truth: list[int]) -> None:
    """Each retrieved neighbour's right prefix (of its continuation, up to REACH tokens), by its
    context agreement and, apart, by its similarity."""
    for match, sim, cont in _cycle["neighbours"]:
        right = common_prefix(cont, truth)
        for key in ("agreement " + _bin(match, (9, 5, 3, 2, 0), ("9+", "5-8", "3-4", "2", "0-1")),
                    "similarity " + _bin(sim, (0.97, 0.95, 0.9, 0.8, -1), (">= 0.97", "0.95-0.97", "0.90-0.95",
                                                                          "0.80-0.90", "< 0.80"))):
            _neighbour[key][0] += 1
            _neighbour[key][1] += right


def _calibration(tree, verdict) -> None:
    """Per (proposer class, depth, the parent's class): the learned rate of every node whose
    parent was accepted (predicted) and whether it was accepted too (actual)."""
    rates, acc = _cycle["rates"], set(verdict.accepted)
    # the rates' own proposer classes; a commit before they had one: one source, "multi" or none
    cls = getattr(rates, "proposer", None) or (lambda s: next(iter(s)) if len(s) == 1 else ("multi" if s else ""))
    depths = tree.depths()
    for i in range(1, len(tree)):
        p = tree.parents[i]
        if p in acc:
            key = (cls(tree.sources[i]), min(depths[i], 4), cls(tree.sources[p]) or "root")
            _rates[key][0] += 1
            _rates[key][1] += _cycle["rate"][i]
            _rates[key][2] += i in acc


def _copy(truth: list[int]) -> tuple[int, str]:
    """The longest prefix of ``truth`` found verbatim in the context or an earlier output, and
    the best context agreement behind its occurrences ("0", "1", "2-3", "4+")."""
    own = _text(_cycle["context"])
    want = _text(truth)
    pools = [own] + _earlier[-200:]
    for n in range(len(want), 0, -1):
        hits = [p for p in pools if want[:n] in p]
        if not hits:
            continue
        best = 0
        for p in hits[:5]:
            q, seen = p.find(want[:n]), 0
            while q >= 0 and seen < 20:
                m = 0
                while m < 16 and q - 1 - m >= 0 and m < len(own) and p[q - 1 - m] == own[-1 - m]:
                    m += 1
                best, seen = max(best, m), seen + 1
                q = p.find(want[:n], q + 1)
        return n, "0" if best == 0 else "1" if best == 1 else "2-3" if best < 4 else "4+"
    return 0, "0"


def main(argv: list[str]) -> int:
    methods = argv[argv.index("--methods") + 1] if "--methods" in argv[:-1] else ""
    if not argv or argv[0] != "replay" or "--exact" in argv or not methods or "," in methods:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        print("(a fast replay of one method: --methods NAME)", file=sys.stderr)
        return 2
    _wrap()
    rc = oilbird_main(argv)
    n = _stats["cycles"]
    if n:
        print(f"\n{n} drafting cycles; tokens per cycle (+1 bonus) if every cycle got (the replay's tau also "
              f"counts the prefill's token):")
        for k in ("accepted", "candidate", "copy"):
            print(f"  {k:10s} {(_stats[k] + n) / n:.3f}")
        for k in sorted(_stats):
            if ":" in k:
                print(f"  {k}: {_stats[k]} tokens")
    if _neighbour:
        print(f"\nretrieved neighbours: mean right prefix of the continuation (up to {REACH} tokens)")
        for k in sorted(_neighbour):
            n, right = _neighbour[k]
            print(f"  {k:22s} {n:7d} neighbours  {right / n:.2f} tokens")
    if _rates:
        print("\nlearned rate vs accepted, nodes whose parent was accepted (proposer, depth, parent's; >= 300 nodes)")
        for k in sorted(_rates, key=str):
            n, pred, hit = _rates[k]
            if n >= 300:
                print(f"  {k[0]:15s} depth {k[1]}  after {k[2]:15s} {n:7d} nodes  rate {pred / n:.3f}  accepted {hit / n:.3f}")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
