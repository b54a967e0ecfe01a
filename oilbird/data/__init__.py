"""Data: requests (API-Bank, HumanEval, GSM8K, MT-Bench, JSONL, the built-in workload) and
recorded agent conversations (``conversations``, the built-in scripted agent). Knows nothing of
drafting or verifying; the core never imports this package."""
