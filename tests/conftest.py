"""Settings for every test process, before torch is imported.

One thread per torch process: `make test` runs one test process per core, each starting runs
of its own, and the tests' models are tiny, so more threads only contend for the cores (a
2-process DDP run sets one thread per process by itself). A run's results do not depend on it:
every comparison of two runs is between runs with the same setting.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
