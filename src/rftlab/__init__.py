"""rftlab: analysis-first research notebooks for reinforcement fine-tuning experiments.

Layers, lowest first (a module imports only its own layer and lower ones; ``tests/test_layers.py``):
types, rewards, envs, policies, runs, rollout, training, launch, analysis, studies, reports, cli. Envs and
rewards are pure and seeded; everything above may do I/O. Inside a layer, a family's code (spectrum, gs1,
poker, arena) lives at ``<layer>/<family>.py`` or ``<layer>/<family>/``; ``rftlab.studies.<family>`` lists
it all.

Importing the package sets ``LITELLM_LOCAL_MODEL_COST_MAP=True`` unless the variable is already set
(docs/platforms.md §2.1). Without it, importing litellm (through eval-protocol) fetches the model cost map
and, when the fetch fails, retries from a background thread that logs at once; the first log records of
that thread and of the importing thread both run litellm's logging filter, which imports
``litellm.rust_bridge.catalog`` on first use, and the two imports deadlock: one of them gets a partially
initialised module and the import of eval-protocol fails (about half the time offline, measured on the
McpGym server module). With the variable set no thread is started, so there is no race. Every process the
project starts imports ``rftlab`` before eval-protocol (the McpGym server scripts do it on their first
line), so the setting is in place before litellm is loaded.
"""

import os as _os

__version__ = "0.1.0"

# litellm (imported by eval-protocol) fetches its model cost map from the internet at import unless this is
# set: the project runs offline, and the fetch's retry thread races the importing thread (module docstring).
# An explicit value in the environment wins.
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
