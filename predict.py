"""Predict with a checkpoint: `python predict.py ckpt_path=PATH [split=test]`.

The flow is in src/my_project/machinery/run/predict.py.
"""

from my_project.machinery.run.predict import main

if __name__ == "__main__":
    main()
