"""How far a pooled tau ratio moves with which requests a run happened to hold.

A run's headline comparison is pooled: method A's committed tokens over its forwards, divided by
method B's, over every request of the run (``results.json``'s ``per_request`` rows). Whether
1.202 clears a target of 1.20 depends on how much that ratio would move on other traffic of the
same kind, which one run can estimate by the bootstrap: draw the run's units with replacement,
pool again, and read the middle 95% of the ratios.

The unit is what is independent enough to draw alone: in a replay a *conversation* (its turns
share a history, a prompt that grows, and one store's growth), elsewhere a request. The store
grows across a whole replay, so its conversations are not strictly exchangeable either: the
interval says how much the ratio depends on which conversations were recorded, not how it would
change with their order (``scripts/per_conversation.py --blocks`` says that).

>>> rows = lambda taus: [{"request": f"c{k}#0", "tokens": 10 * t, "forwards": 10} for k, t in enumerate(taus)]
>>> res = {"replay": {"mode": "fast"},
...        "methods": {"a": {"per_request": rows([3, 3, 3])}, "b": {"per_request": rows([2, 2, 2])}}}
>>> r = pooled_ratio(res, "a", "b")
>>> (r["ratio"], r["low"], r["high"], r["units"], r["unit"])
(1.5, 1.5, 1.5, 3, 'conversation')
"""
from __future__ import annotations

import numpy as np

LEVEL = 0.95
RESAMPLES = 2000
SEED = 0            # the same run gives the same interval


def unit_of(request: str, replay: bool) -> str:
    """The unit a request is drawn with: a replayed turn's conversation (``CONVERSATION#TURN``),
    else the request itself."""
    return request.rsplit("#", 1)[0] if replay else request


def pooled_ratio(results: dict, a: str, b: str, level: float = LEVEL, resamples: int = RESAMPLES,
                 seed: int = SEED) -> dict | None:
    """Method ``a``'s pooled tau over ``b``'s on the requests both ran, with a percentile
    bootstrap interval at ``level`` over the run's units (:func:`unit_of`): ``{"ratio", "low",
    "high", "units", "unit"}``. None where the run has no per-request rows both share, or where
    ``b`` committed nothing."""
    replay = bool(results.get("replay"))
    rows_a = {r["request"]: r for r in results["methods"][a].get("per_request", [])}
    rows_b = {r["request"]: r for r in results["methods"][b].get("per_request", [])}
    units: dict[str, list[int]] = {}
    for req in rows_a.keys() & rows_b.keys():
        u = units.setdefault(unit_of(req, replay), [0, 0, 0, 0])
        for k, (row, key) in enumerate(((rows_a, "tokens"), (rows_a, "forwards"), (rows_b, "tokens"),
                                        (rows_b, "forwards"))):
            u[k] += int(row[req][key])
    if not units:
        return None
    sums = np.array([units[u] for u in sorted(units)], dtype=float)      # (units, 4), in a fixed order
    total = sums.sum(axis=0)
    if not (total[1] and total[2] and total[3]):
        return None
    draw = np.random.default_rng(seed).integers(0, len(sums), size=(resamples, len(sums)))
    drawn = sums[draw].sum(axis=1)                                       # (resamples, 4)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = (drawn[:, 0] / drawn[:, 1]) / (drawn[:, 2] / drawn[:, 3])
    ratios = ratios[np.isfinite(ratios)]
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(ratios, [tail, 100 - tail]) if len(ratios) else (float("nan"), float("nan"))
    return {"ratio": float((total[0] / total[1]) / (total[2] / total[3])), "low": float(low), "high": float(high),
            "units": len(sums), "unit": "conversation" if replay else "request"}


def ratio_words(r: dict) -> str:
    """One interval as the tables print it: ``1.144 (1.118-1.170)``."""
    return f"{r['ratio']:.3f} ({r['low']:.3f}-{r['high']:.3f})"
