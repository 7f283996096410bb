"""Lightning callbacks of the template, one concern per module; each is in configs/callbacks/."""
