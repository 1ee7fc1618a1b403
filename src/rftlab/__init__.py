"""rftlab: analysis-first research notebooks for reinforcement fine-tuning experiments.

Layers, lowest first (a module imports only its own layer and lower ones; ``tests/test_layers.py``):
types, rewards, envs, policies, runs, rollout, training, launch, analysis, studies, reports, cli. Envs and
rewards are pure and seeded; everything above may do I/O. Inside a layer, a family's code (spectrum, gs1,
poker, arena) lives at ``<layer>/<family>.py`` or ``<layer>/<family>/``; ``rftlab.studies.<family>`` lists
it all.
"""

import os as _os

__version__ = "0.1.0"

# litellm (imported by eval-protocol) fetches its model cost map from the internet at import unless this is
# set; the project runs offline, so every process that imports rftlab first uses the bundled map
# (docs/platforms.md §4.5). An explicit value in the environment wins.
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
