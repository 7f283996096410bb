"""Predict with a checkpoint: `python predict.py ckpt_path=PATH [split=test | input_path=x.npy]`.

The code is in src/my_project/predict.py.
"""

from my_project.predict import main

if __name__ == "__main__":
    main()
