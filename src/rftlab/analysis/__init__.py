"""Statistics for RFT experiments: trends, paired noninferiority bounds, gates, decision rules, power.

Formulas and conventions follow ``docs/statistics.md``; every bound reports its level, sidedness and
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
  Each bound reports ``one_sided_level`` (1 - alpha, for lower and upper each) and
  ``two_sided_level`` (1 - 2·alpha, for the interval [lower, upper]); the asymptotic methods return
  ``inconclusive`` with a reason on degenerate samples. The betting bound is anytime-valid over the
  items of *one* comparison, not over checkpoints re-evaluated every epoch.
* ``multiplicity`` — ``repeated_looks_gate`` (alpha split over a pre-declared number of looks at
  successive checkpoints), ``simulate_repeated_looks`` and ``seed_shopping_error_rate``.
* ``trends`` — ``fit_trend(x, y)`` (OLS + Theil–Sen + halves, optional HAC), ``slope_flatness``
  (equivalence within ±eps *and* whether the slope differs from zero), ``pooled_slope``.
* ``gates`` — ``evaluate_gate_file(spec.json, metrics)`` for ``activation_gate.checks``; values must be
  finite numbers or strict decimal strings, thresholds finite with min <= max.
* ``decision_rules`` — ``evaluate_decision_rule_file(spec.json, treatment.jsonl, baseline.jsonl)``;
  order-dependent methods need ``permutation_seed`` in the rule (recorded with every result).
* ``intervals`` — ``wilson_interval(k, n)`` and ``normal_mean_interval(values)`` for evaluation
  summaries (docs/arena.md §10.3).
* ``power`` — ``coverage_table``, ``power_curve``, ``minimum_detectable_difference(_table)``,
  ``required_n`` under the binomial discordance model: exact (``exact_pass_rate``, a sum over the
  trinomial distribution of the counts) for the count-only bounds, Monte Carlo with standard errors
  and an explicit ``numpy.random.Generator`` for the order-dependent ones.
"""
