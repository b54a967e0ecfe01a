"""Sampling end-to-end on the real default model (SmolLM2-135M-Instruct): a few requests
sampled by the tree decoders and the sampled AR baseline; every output is valid and equal to
plain sampling with the same seed, and a second run reproduces them (the distribution proof is
tests/test_sampling.py, on the mock model)."""
import pytest

from oilbird.data.requests import load_requests
from oilbird.evaluation.bench import run_bench
from oilbird.sampling import SamplingParams
from oilbird.verifier import Verifier

pytestmark = pytest.mark.model


@pytest.mark.parametrize("temperature, top_p", [(0.7, 1.0), (1.0, 0.9)])
def test_sampled_bench_on_the_real_model_is_lossless_and_reproducible(real_lm, temperature, top_p):
    reqs = load_requests("builtin", limit=3)
    params = SamplingParams(temperature, top_p, seed=11)
    outputs = [[], []]
    runs = [run_bench(reqs, ["ar", "goose", "oilbird"], Verifier(real_lm), max_new_tokens=24, progress=False,
                      sampling=params, trace_sink=lambda trs, k=k: outputs[k].extend(
                          (t.method, t.request_id, t.output_ids) for t in trs)) for k in range(2)]
    for m, r in runs[0]["methods"].items():
        assert r["lossless"] is True and r["valid"], (m, r.get("first_failure"))
        assert r["tau"] >= 1.0 - 1e-9
    # a whole second run with the same seed: every tree method's output on every request is the same
    assert len(outputs[0]) == 2 * len(reqs) and outputs[0] == outputs[1]
    assert runs[0]["sampling"]["seed"] == 11
