"""The project's Optuna sweeper for Hydra: `python train.py -m hparams_search=<name>`.

Hydra finds it through its plugin namespace, `hydra_plugins` (a namespace package: no
``__init__.py`` above this folder), by importing every module here whose name does not start
with ``_`` each time it starts, in a way that leaves them out of ``sys.modules`` while they
run. So `sweeper.py` is the only module, and imports neither Optuna, torch nor Lightning at
the top: a search needs them, a plain run does not.
"""
