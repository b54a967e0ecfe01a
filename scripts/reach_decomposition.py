"""Where the hidden-state key's reach goes before a drafter can use it (issue 25's question).

    python scripts/reach_decomposition.py replay --data agent-transcripts --limit 20 --methods oilbird \\
        --cache runs/tcache --diagnose --out runs/reach-steps --force

The diagnosis' key (paper section 3) reaches ~80% of the gap positions; the drafter's key about
a third. Between them lie four differences, each measured here at every gap position a drafter
drafts (not a turn's first token), on the same pool as ``replay --diagnose`` (earlier turns'
recordings), from the widest to the drafter's own:

``own``         the diagnosis' key: the 8 records nearest the root's own state, any token, hit if
                one is followed by the true next token;
``ceiling``     some record of the root token itself is followed by the true next token (no
                ranking: the most any root-checked key can reach);
``own_rooted``  the 8 records of the root token nearest the root's own state, hit as above (what
                the root check keeps of the diagnosis' key);
``lag_rooted``  the 8 records followed by the root nearest the state *before* it, among all of
                them (the state a drafter has: the root's is computed by the next forward);
``drafter``     the drafter's key as built, diagnose's ``drafter_hit``: since the twentieth session
                the exact root check, so the same as ``lag_rooted``; before it, the 8 nearest of
                those followed by the root among the 64 records nearest that state (the cut).

So own - ceiling is reach through records of another token (a substitution: copying after a
token we did not write), ceiling - own_rooted what ranking by state loses, own_rooted -
lag_rooted the lag, lag_rooted - drafter the 64-record cut (none since the check is exact). It
wraps the diagnosis' pool class for one run and prints the fractions after the run's own output;
the library is unchanged. ``RD_ROOT_WIDEN=N`` sets the live key's ``SemanticConfig.root_widen``
for the run: the root check among the 8 * N nearest records only (the first version's cut was
N = 8; the default, 0, ranks them all), to measure what the cut costs in tau (the ``drafter``
step reads the diagnosis' exact key either way).
Results: docs/results.md, "Where the key's reach goes before the drafter can use it".
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oilbird.evaluation import diagnose as D  # noqa: E402

STEPS = ("own", "ceiling", "own_rooted", "lag_rooted", "drafter")


def steps(pool: D.Pool, prompt, output, states, d: D.RequestDiagnosis) -> list[dict[str, bool]]:
    """The five reaches (module doc) at every gap position of ``d`` (``pool.label``'s result for
    this request, before it joins the pool) that a drafter drafts, in output order."""
    prompt, output = [int(t) for t in prompt], [int(t) for t in output]
    P, n = len(prompt), len(output)
    if not len(pool) or P < 2:
        return []
    X = pool.states                                             # the records' normalised states
    pos = np.asarray(pool.record_pos)
    arr = pool._arr
    tok = pool._rec_tok
    own_q = D._normalise(states[P - 1:P - 1 + n])
    context = prompt + output
    # the records followed by the root nearest the state before it, among all of them
    lag = pool.followed_top(np.asarray(context[P - 1:P - 1 + n]), D._normalise(states[P - 2:P - 2 + n]))

    def after(rows, ahead: int) -> np.ndarray:
        """The token ``ahead`` after each record (past the stream's end: left out)."""
        p = pos[rows] + ahead
        return arr[p[p < len(arr)]]

    out = []
    for t in range(1, n):
        if not (d.present_2[t] and not d.oracle_hit[t]) or d.drafter_hit[t] is None:
            continue
        root, truth = context[P - 1 + t], output[t]
        same = np.nonzero(tok == root)[0]                            # records of the root token
        top = same[np.argsort(-(X[same] @ own_q[t]), kind="stable")[: pool.k]]
        out.append({"own": bool(d.semantic_hit[t]),
                    "ceiling": bool(np.any(after(same, 1) == truth)),
                    "own_rooted": bool(np.any(after(top, 1) == truth)),
                    "lag_rooted": bool(any(arr[i + 2] == truth for i in lag[t])),
                    "drafter": bool(d.drafter_hit[t])})
    return out


class Tally:
    """The steps of every request the wrapped pool labels."""

    def __init__(self):
        self.rows: list[dict[str, bool]] = []

    def wrap(self, pool_class):
        tally, label = self, pool_class.label

        def wrapped(pool, request_id, prompt, output, states):
            d = label(pool, request_id, prompt, output, states)
            tally.rows += steps(pool, prompt, output, np.asarray(states), d)
            return d
        pool_class.label = wrapped

    def line(self) -> str:
        n = len(self.rows)
        if not n:
            return "no gap position a drafter drafts"
        return f"{n} gap positions a drafter drafts: " + ", ".join(
            f"{s} {100 * sum(r[s] for r in self.rows) / n:.1f}%" for s in STEPS)


def widen(n: int) -> None:
    """Every SemanticConfig made from now on looks up ``8 * n`` records for the root check."""
    from oilbird.sources import semantic as S
    init = S.SemanticConfig.__init__

    def wider(self, *a, **k):
        init(self, *a, **k)
        self.root_widen = n
    S.SemanticConfig.__init__ = wider


if __name__ == "__main__":
    import os

    from oilbird.__main__ import main
    if os.environ.get("RD_ROOT_WIDEN"):
        widen(int(os.environ["RD_ROOT_WIDEN"]))
    tally = Tally()
    tally.wrap(D.Pool)
    rc = main(sys.argv[1:])
    print(tally.line())
    sys.exit(rc)
