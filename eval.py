"""Evaluate a checkpoint: `python eval.py ckpt_path=PATH`. The code is in src/my_project/eval.py."""

from my_project.eval import main

if __name__ == "__main__":
    main()
