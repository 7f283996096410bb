"""Train: `python train.py [Hydra overrides]`. The flow is in src/my_project/machinery/run/train.py."""

from my_project.machinery.run.train import main

if __name__ == "__main__":
    main()
