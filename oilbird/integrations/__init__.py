"""Oilbird inside other engines (vLLM: :mod:`oilbird.integrations.vllm`)."""
