"""scripts/centred_key_probe.py: the anisotropy numbers and the quantile map it replays with."""
import importlib.util
import json
from pathlib import Path

import numpy as np

spec = importlib.util.spec_from_file_location("centred_key_probe",
                                              Path(__file__).parents[1] / "scripts" / "centred_key_probe.py")
ck = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ck)


def _states(files=4, n=300, dim=16, seed=1):
    rng = np.random.default_rng(seed)
    shared = np.zeros(dim)
    shared[0] = 40.0                                    # one massive dimension, as the real key layer has
    return [(rng.normal(size=(n, dim)) + shared).astype(np.float32) for _ in range(files)]


def test_a_shared_mean_dominates_the_raw_cosine_and_centring_removes_it():
    out, mu, fit = ck.stats(_states(), queries=200)
    assert out["mean_pair_cosine_raw"] > 0.9 and abs(out["mean_pair_cosine_centred"]) < 0.05
    assert abs(mu[0] - 40) < 1 and out["largest_mean_dims"][0] > 39
    assert 0 <= out["nearest_shared"] <= out["nearest"] == 8
    assert np.all(np.diff(fit[:, 0]) >= 0) and np.all(np.diff(fit[:, 1]) >= 0)   # monotone both ways
    assert fit[0, 0] == -1 and tuple(fit[-1]) == (1.0, 1.0)


def test_the_map_keeps_the_order_and_matches_quantiles():
    rng = np.random.default_rng(0)
    centred = rng.uniform(-0.2, 0.9, 5000)
    raw = 0.5 + 0.5 * np.sort(rng.uniform(0, 1, 5000))          # another scale, the same ranks
    fit = ck.quantile_map(centred, raw)
    xs = np.linspace(-1, 1, 50)
    ys = ck.apply_map(xs, fit)
    assert np.all(np.diff(ys) >= 0)
    assert abs(ck.apply_map(np.median(centred), fit) - np.median(raw)) < 0.01


def test_stats_writes_what_replay_reads_and_bad_calls_are_one_line(tmp_path, capsys):
    for k, s in enumerate(_states(files=3, n=50)):
        np.savez(tmp_path / f"{k}.npz", states=s)
    out = tmp_path / "centred"
    assert ck.main(["stats", str(tmp_path), "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == 3
    assert np.load(out / "mean.npy").shape == (16,) and np.load(out / "map.npy").shape[1] == 2
    assert ck.main(["stats", str(tmp_path / "none"), "--out", str(out)]) == 2
    assert ck.main(["replay", "--data", "x"]) == 2 and ck.main(["replay", "--centre", str(out), "--exact"]) == 2
    assert "usage" in capsys.readouterr().err
