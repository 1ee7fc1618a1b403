"""GS1 study launch: the backend composition (local or Tinker) and the correctness preflight."""
