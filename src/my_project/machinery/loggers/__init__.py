"""Logger factories: Weights & Biases that goes offline by itself (`wandb`)."""
