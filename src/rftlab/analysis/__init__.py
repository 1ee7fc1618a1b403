"""Statistics for RFT experiments: trends, paired noninferiority bounds, gates, decision rules, power.

Formulas and conventions follow ``specs/statistics.md``; every bound reports its level, sidedness and
replication unit.
"""
