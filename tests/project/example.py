"""How the examples' tests name the example they test: by name, never as the project's
defaults. A team that moves in makes its own module the default (README, "Bring your own
model and data"); these tests go on testing the examples beside it, until it deletes them.
"""

# The digits classifier: its model and data.
CLASSIFIER = ["model=classifier", "data=digits"]
# What a training run of it also names: the validation metric that picks its checkpoints and
# that sweeps optimize, which configs/train.yaml sets for the project's default model.
METRICS = ["monitor=val/acc", "monitor_mode=max", "optimized_metric=val/acc_best"]
TRAIN_CLASSIFIER = [*CLASSIFIER, *METRICS]
