"""Export a checkpoint's model: `python export.py ckpt_path=PATH format=onnx`. The flow is in
src/my_project/machinery/run/export.py."""

from my_project.machinery.run.export import main

if __name__ == "__main__":
    main()
