"""Evaluation: what the decoder core is measured with. Benchmarks (``bench``, ``peers``,
``store_bench``, ``verify_cost``), recorded-traffic replay (``replay``), the identifiability-gap
diagnosis (``diagnose``), results as data (``results``), run folders (``runs``) and reports
(``report``). Imports the core and ``oilbird.data``; the core never imports this package."""
