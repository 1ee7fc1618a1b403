"""Arena training: LoRA SFT on the tinker interface and the Stage-1 recipe."""
