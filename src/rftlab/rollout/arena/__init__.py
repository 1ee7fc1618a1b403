"""Arena rollouts: the Stage-1 SFT data built from seeds, the frozen 60-case evaluation and the validation
scorer."""
