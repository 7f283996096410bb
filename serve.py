"""Serve a checkpoint over HTTP: `python serve.py ckpt_path=PATH`. The flow is in
src/my_project/machinery/run/serve.py."""

from my_project.machinery.run.serve import main

if __name__ == "__main__":
    main()
