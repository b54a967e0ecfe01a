"""How far a pooled tau ratio moves with which requests a run happened to hold.

A run's headline comparison is pooled: method A's committed tokens over its forwards, divided by
method B's, over every request of the run (``results.json``'s ``per_request`` rows). Whether
1.202 clears a target of 1.20 depends on how much that ratio would move on other traffic of the
same kind, which one run can estimate by the bootstrap: draw the run's units with replacement,
pool again, and read the middle 95% of the ratios.

The unit is what is independent enough to draw alone: a *conversation* (its turns share a
history and a prompt that grows: a replay's turns, the built-in workload's requests, an API-Bank
file's records; a row's ``unit``), else a request. What the interval covers is narrower than
"this traffic": each conversation's numbers were made by a store that had seen this run's
earlier conversations, in this order, from empty, and drawing conversations again does not
replay them with another store. So it says how far a run of this many conversations, from an
empty store, in this order, depends on which conversations were recorded; the store's warming
(``scripts/per_conversation.py --blocks``) is not in it. Below :data:`MIN_UNITS` units the
percentile bootstrap holds its level poorly (drawn from the 100 recorded conversations, a nominal
95% interval held the whole set's ratio in 68% of runs of 3 conversations, 87% of 10, 91% of 20,
93% of 100: ``scripts/interval_coverage.py``), so no interval is given.

>>> rows = lambda taus: [{"request": f"c{k}#0", "tokens": 10 * t, "forwards": 10} for k, t in enumerate(taus)]
>>> res = {"replay": {"mode": "fast"},
...        "methods": {"a": {"per_request": rows([3, 3, 3])}, "b": {"per_request": rows([2, 2, 2])}}}
>>> r = pooled_ratio(res, "a", "b")
>>> (r["ratio"], r["low"], r["high"], r["units"], r["unit"])
(1.5, None, None, 3, 'conversation')
"""
from __future__ import annotations

import numpy as np

LEVEL = 0.95
RESAMPLES = 2000
SEED = 0            # the same run gives the same interval
MIN_UNITS = 10      # fewer units: the ratio without an interval
CHUNK = 250         # draws at a time (at once, 2,000 draws of 5,000 units held 320 MB of sums)


def unit_of(row: dict, replay: bool) -> str:
    """The unit a request's row is drawn with: its ``unit`` (the conversation or file it is a turn
    of), else, in a replay older than that field, the conversation of its id
    (``CONVERSATION#TURN``), else the request itself."""
    if isinstance(row.get("unit"), str):
        return row["unit"]
    return row["request"].rsplit("#", 1)[0] if replay else row["request"]


def pooled_ratio(results: dict, a: str, b: str, level: float = LEVEL, resamples: int = RESAMPLES,
                 seed: int = SEED, min_units: int = MIN_UNITS) -> dict | None:
    """Method ``a``'s pooled tau over ``b``'s on the requests both ran, with a percentile
    bootstrap interval at ``level`` over the run's units (:func:`unit_of`): ``{"ratio", "low",
    "high", "units", "unit"}``, ``low`` and ``high`` None below ``min_units`` units. None
    where the run has no per-request rows both share, or where ``b`` committed nothing."""
    replay = bool(results.get("replay"))
    rows_a = {r["request"]: r for r in results["methods"][a].get("per_request", [])}
    rows_b = {r["request"]: r for r in results["methods"][b].get("per_request", [])}
    units: dict[str, list[int]] = {}
    for req in rows_a.keys() & rows_b.keys():
        u = units.setdefault(unit_of(rows_a[req], replay), [0, 0, 0, 0])
        for k, (row, key) in enumerate(((rows_a, "tokens"), (rows_a, "forwards"), (rows_b, "tokens"),
                                        (rows_b, "forwards"))):
            u[k] += int(row[req][key])
    if not units:
        return None
    sums = np.array([units[u] for u in sorted(units)], dtype=float)      # (units, 4), in a fixed order
    total = sums.sum(axis=0)
    if not (total[1] and total[2] and total[3]):
        return None
    grouped = any(isinstance(r.get("unit"), str) for r in rows_a.values()) or replay
    out = {"ratio": float((total[0] / total[1]) / (total[2] / total[3])), "low": None, "high": None,
           "units": len(sums), "unit": "conversation" if grouped else "request"}
    if len(sums) < min_units:
        return out
    rng, ratios = np.random.default_rng(seed), []
    for start in range(0, resamples, CHUNK):
        draw = rng.integers(0, len(sums), size=(min(CHUNK, resamples - start), len(sums)))
        drawn = sums[draw].sum(axis=1)                                   # (draws, 4)
        with np.errstate(divide="ignore", invalid="ignore"):      # (a draw of units that all took no forward)
            ratios.append((drawn[:, 0] / drawn[:, 1]) / (drawn[:, 2] / drawn[:, 3]))
    ratios = np.concatenate(ratios)
    ratios = ratios[np.isfinite(ratios)]
    tail = 100 * (1 - level) / 2
    if len(ratios):
        out["low"], out["high"] = (float(x) for x in np.percentile(ratios, [tail, 100 - tail]))
    return out


def ratio_words(r: dict) -> str:
    """One ratio as the tables print it: ``1.144 (1.124-1.161, 20 conversations)``, or without
    an interval below :data:`MIN_UNITS` units."""
    n = f"{r['units']} {r['unit']}{'s' * (r['units'] != 1)}"
    if r["low"] is None:
        return f"{r['ratio']:.3f} (no interval: {n})"
    return f"{r['ratio']:.3f} ({r['low']:.3f}-{r['high']:.3f}, {n})"
