"""Serving: Oilbird inside vLLM (``vllm``: the proposer vLLM loads by name; ``chains``: the
merged tree reduced to one chain per request) and ``serve_bench``, which runs it against
vLLM's own proposers. Runs in its own environment (``requirements-vllm.txt``)."""
