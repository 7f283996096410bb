"""Evaluate a checkpoint: `python eval.py ckpt_path=PATH`. The flow is in
src/my_project/machinery/run/evaluate.py."""

from my_project.machinery.run.evaluate import main

if __name__ == "__main__":
    main()
