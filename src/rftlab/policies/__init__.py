"""Reference, oracle and control policies used as baselines, in preflight diagnostics and in tests."""
