"""Statistics for RFT experiments: trends, paired noninferiority bounds, gates, decision rules, power.

Formulas and conventions follow ``specs/statistics.md``; every bound reports its level, sidedness and
replication unit.

Where to look (each module is small and self-contained):

* ``io`` — ``load_paired_items(treatment.jsonl, baseline.jsonl)`` joins per-item files by ``item_id``;
  ``load_metric_series(metrics.jsonl, metric)`` gives one point per epoch/step.
* ``noninferiority`` — ``paired_noninferiority(treatment, baseline, margin, alpha)`` runs every bound
  (``METHODS``) and returns a report whose ``decision`` is the pre-registered Hoeffding one; single
  bounds: ``hoeffding_lower_bound``, ``empirical_bernstein_lower_bound``,
  ``plugin_empirical_bernstein_lower_bound``, ``betting_lower_bound``, ``betting_confidence_sequence``,
  ``paired_t_lower_bound``, ``tango_lower_bound``; batched cores for simulations: ``batch_lower_bounds``,
  ``batch_noninferior``.
* ``trends`` — ``fit_trend(x, y)`` (OLS + Theil–Sen + halves, optional HAC), ``slope_flatness``,
  ``pooled_slope``.
* ``gates`` — ``evaluate_gate_file(spec.json, metrics)`` for ``activation_gate.checks``.
* ``decision_rules`` — ``evaluate_decision_rule_file(spec.json, treatment.jsonl, baseline.jsonl)``.
* ``intervals`` — ``wilson_interval(k, n)`` and ``normal_mean_interval(values)`` for evaluation
  summaries (arena spec §10.3).
* ``power`` — ``coverage_table``, ``power_curve``, ``minimum_detectable_difference(_table)``,
  ``required_n`` under the binomial discordance model, with an explicit ``numpy.random.Generator``.
"""
