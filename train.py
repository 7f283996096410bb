"""Train: `python train.py [Hydra overrides]`. The code is in src/my_project/train.py."""

from my_project.train import main

if __name__ == "__main__":
    main()
