"""Probe: lexical continuations grafted below the token-adjacency branches (not kept).

    python scripts/graft_probe.py replay --data agent-transcripts --limit 20 --methods oilbird,oilbird-graft \\
        --cache runs/tcache --out runs/graft --force

Most of what the copy oracle has beyond every candidate follows other words than ours (context
agreement 0), so no key that reads the context up to the root finds it. This probe looks one
token further: below each branch the adjacency source (``recycling``) proposes, with first token
x, it asks the suffix source's indexes (this request's and the store's) for the context plus x,
merges the continuations of the longest match's occurrences (up to 16) into a weighted trie and
grafts its heaviest path (``G_DEPTH`` tokens, default 8) under x, where the match is at least
``G_MINL`` tokens (default 1). ``G_NAME``: the grafted chains' source name (default ``graft``, a
source of its own, so x becomes a node two sources propose); ``replace`` puts the grafted
continuation in place of the adjacency branch's own greedy tail instead. For one run it adds a
preset ``oilbird-graft`` (``oilbird`` plus the graft) to the fill; the library is unchanged.
Results (every variant about -1%): docs/results.md, "Lexical continuations below the adjacency
branches".
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oilbird import methods as M, presets as PR  # noqa: E402
from oilbird.sources.base import Chain, DraftSource, Proposal  # noqa: E402
from oilbird.sources.suffix import _Node, best_first  # noqa: E402

DEPTH = int(os.environ.get("G_DEPTH", "8"))
MIN_L = int(os.environ.get("G_MINL", "1"))
NAME = os.environ.get("G_NAME", "graft")
OCCURRENCES = 16


class GraftSource(DraftSource):
    """The adjacency source's branches, each continued by what followed its first token (and
    the context before it) in the suffix source's indexes."""
    name = "graft"
    role = "branches"

    def __init__(self, suffix, recycling, name: str = "graft", depth: int = DEPTH, min_len: int = MIN_L):
        self.suffix, self.recycling, self.name = suffix, recycling, name
        self.depth, self.min_len = depth, min_len

    def knows(self, tok) -> bool:          # the semantic gate is the host's; this source adds no row
        return False

    def grafts(self, ctx, chains) -> list[Chain]:
        tree, out = ctx.tree, []
        for c in chains:
            path, n = [], c.attach
            while n > 0:
                path.append(tree.tokens[n])
                n = tree.parents[n]
            occ = self.suffix._occurrences(list(ctx.tokens) + path[::-1] + [c.tokens[0]])
            if not occ or occ[0][2] < self.min_len:
                continue
            root, used = _Node(), 0
            for index, p, L in occ:
                if L < occ[0][2] or used >= OCCURRENCES:
                    break
                cont = index.continuation(p, self.depth)
                if not cont:
                    continue
                used += 1
                node = root
                node.w += 1
                for t in cont:
                    node = node.kids.setdefault(t, _Node())
                    node.w += 1
            paths = best_first(root, self.depth, 0.0)
            if paths:
                out.append(Chain([c.tokens[0]] + paths[0][0], c.score, attach=c.attach, match=occ[0][2]))
        return out

    def propose(self, ctx, budget):
        return Proposal(self.grafts(ctx, self.recycling.propose(ctx, budget).chains))


def replacing(source: GraftSource):
    """The adjacency source's ``propose`` with each branch's tail replaced by its graft."""
    own = source.recycling.propose

    def propose(ctx, budget):
        base = own(ctx, budget)
        got = {(g.attach, g.tokens[0]): g for g in source.grafts(ctx, base.chains)}
        base.chains = [got.get((c.attach, c.tokens[0]), c) for c in base.chains]
        return base
    return propose


def _install() -> None:
    M.PRESETS["oilbird-graft"] = M.PRESETS["oilbird"] + ("graft",)
    M.PRESET_FILLS["oilbird-graft"] = "expected"
    make = PR.make_sources

    def make_sources(names, *a, **k):
        names = list(names)
        srcs = make([n for n in names if n != "graft"], *a, **k)
        if "graft" in names:
            g = GraftSource(next(s for s in srcs if s.name == "suffix"),
                            next(s for s in srcs if s.name == "recycling"), name=NAME)
            if NAME == "replace":
                g.recycling.propose = replacing(g)
            else:
                srcs.append(g)
        return srcs
    PR.make_sources = make_sources


def main(argv: list[str]) -> int:
    from oilbird.__main__ import main as oilbird_main
    if not argv or argv[0] != "replay" or "--exact" in argv:
        print("a fast replay: python scripts/graft_probe.py replay ... --methods oilbird,oilbird-graft", file=sys.stderr)
        return 2
    _install()
    return oilbird_main(list(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
