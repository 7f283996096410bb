"""Small helpers shared by the entry points: config discovery and printing, wandb, plots."""
