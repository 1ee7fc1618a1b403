"""Training loops and their plug-ins (advantage estimators, the GS1/GRPO client loop)."""
