"""How user scripts get compiled: Hugging Face ``Trainer`` (no script change) and plain PyTorch (one call)."""
