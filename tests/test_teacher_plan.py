"""scripts/teacher_plan.py: teacher forcing's counts from the tokenizer and config alone."""
import importlib.util
import json
from pathlib import Path

import pytest

from oilbird.model import ModelError

spec = importlib.util.spec_from_file_location("teacher_plan", Path(__file__).parents[1] / "scripts" / "teacher_plan.py")
tp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tp)


def test_plans_the_default_model_without_its_weights(capsys):
    assert tp.main(["--data", "agent-builtin", "--limit", "2", "--gflops", "100"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["conversations"] == 2 and out["turns"] > 2 and out["tokens"] > 0
    # the shared prefix forwards each conversation's common start once: never more tokens than without
    assert 0 < out["shared_prefix"]["tokens_forwarded"] <= out["no_shared_prefix"]["tokens_forwarded"]


def test_a_missing_model_is_the_models_own_error(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        tp.main(["--data", "agent-builtin", "--limit", "1", "--model", str(tmp_path / "none"), "--gflops", "1"])
