"""The files stages hand each other: models, heads, and the pretraining's checkpoints,
cache and history."""
