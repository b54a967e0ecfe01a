"""scripts/windowed_key_probe.py: the key with history it replays with, and its similarity map."""
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

SCRIPTS = Path(__file__).parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))           # it reuses centred_key_probe's quantile map
spec = importlib.util.spec_from_file_location("windowed_key_probe", SCRIPTS / "windowed_key_probe.py")
wk = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wk)


def test_the_window_sums_decayed_unit_states_and_never_crosses_a_turn():
    rng = np.random.default_rng(0)
    s = rng.normal(size=(7, 5)).astype(np.float32)
    u = s / np.linalg.norm(s, axis=1, keepdims=True)
    w = wk.windowed(s, [0, 4, 7], 3, 0.5)                 # two turns: rows 0-3 and 4-6 (7: the end offset)
    assert np.allclose(w[2], u[2] + 0.5 * u[1] + 0.25 * u[0])
    assert np.allclose(w[5], u[5] + 0.5 * u[4])          # row 4 is a turn's first: nothing before it
    assert np.allclose(w[4], u[4]) and np.allclose(w[0], u[0])
    assert np.allclose(wk.windowed(s, [0], 1, 0.5), u)   # a window of one is the key as it is


def test_stats_writes_what_replay_reads_and_bad_calls_are_one_line(tmp_path, capsys):
    rng = np.random.default_rng(1)
    for k in range(3):
        np.savez(tmp_path / f"{k}.npz", states=rng.normal(size=(60, 8)).astype(np.float32),
                 offsets=np.array([0, 20, 60]))
    out = tmp_path / "w"
    assert wk.main(["stats", str(tmp_path), "--window", "2", "--decay", "0.5", "--out", str(out)]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["files"] == 3 and 0 <= said["nearest_shared"] <= said["nearest"] == 8
    assert json.loads((out / "window.json").read_text()) == {"window": 2, "decay": 0.5}
    fit = np.load(out / "map.npy")
    assert np.all(np.diff(fit[:, 0]) >= 0) and np.all(np.diff(fit[:, 1]) >= 0)
    assert wk.main(["stats", str(tmp_path / "none"), "--out", str(out)]) == 2
    assert wk.main(["replay", "--data", "x"]) == 2 and wk.main(["replay", "--windowed", str(out), "--exact"]) == 2
    assert "usage" in capsys.readouterr().err
