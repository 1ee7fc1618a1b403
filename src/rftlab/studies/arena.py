"""The arena Stage-1 SFT study: the driver the notebooks (``04_arena_env``, ``05_arena``) and the CLI
(``rftlab arena``) both call.

The driver is split in parts, all re-exported here:

- ``rftlab.studies.arena_frozen``: frozen-evaluation I/O (``evaluate_frozen``, ``write_evaluation``,
  ``read_rows``, ``check_sft_rows``);
- ``rftlab.studies.arena_lineage``: ``run_stage1``, the seed's Stage-1 order of work as one lineage;
- ``rftlab.studies.arena_lineage_store``: a lineage's run-store side (``Stage1Result``, the lineage key);
- ``rftlab.studies.arena_lineages``: several lineages, their tables, the lineage study, the gates' audit.

Bad input raises ``ValueError``.

The family's modules, layer by layer (``tests/test_layers.py`` keeps this list complete):

- envs: ``rftlab.envs.arena`` (world, rules, reward, oracle, protocol, frozen cases, env)
- policies: ``rftlab.policies.arena`` (scripted table and baselines, reply providers, the local server)
- rollout: ``rftlab.rollout.arena`` (SFT data, frozen evaluation and validation scorer)
- training: ``rftlab.training.arena`` (the Stage-1 recipe, LoRA SFT on the tinker interface, the Stage-1
  spec, backends and single-evaluation rule, the simulated learner)
- analysis: ``rftlab.analysis.arena`` (evaluation summaries, the §10.6 comparison, gates, checkpoint
  selection, comparisons of baselines, the data audit, handoff)
- studies: ``rftlab.studies.arena`` and the parts above
- cli: ``rftlab.cli.arena``
"""

from __future__ import annotations

from rftlab.studies.arena_frozen import (
    FrozenEvaluation,
    check_sft_rows,
    evaluate_frozen,
    read_rows,
    write_evaluation,
)
from rftlab.studies.arena_lineage import run_stage1
from rftlab.studies.arena_lineage_store import STAGES, Stage1Result, balanced_prefix
from rftlab.studies.arena_lineages import (
    LineageStudy,
    audit_gates,
    final_records,
    lineage_rows,
    lineage_study,
    simulated_lineages,
    write_spec_variant,
)

__all__ = [
    "STAGES",
    "FrozenEvaluation",
    "LineageStudy",
    "Stage1Result",
    "audit_gates",
    "balanced_prefix",
    "check_sft_rows",
    "evaluate_frozen",
    "final_records",
    "lineage_rows",
    "lineage_study",
    "read_rows",
    "run_stage1",
    "simulated_lineages",
    "write_evaluation",
    "write_spec_variant",
]
