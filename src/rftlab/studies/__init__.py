"""Studies: one driver per family (``spectrum``, ``gs1``, ``poker``, ``arena``), what the notebooks and the CLI
both call. A driver composes the layers below (envs → … → analysis) into the family's experiment; it holds
no statistics or training of its own. Drivers raise ``ValueError`` for bad input (the CLI turns it into a
usage error) and never print. Each driver's docstring lists its family's modules, layer by layer."""
