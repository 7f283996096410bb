"""A project written as lightning-hydra-template writes one (its `src/`, folder for folder):
`models/mnist_module.py` (the network and a `_partial_` optimizer and scheduler from Hydra,
`compile` as an option, MeanMetric/MaxMetric bookkeeping), `models/components/
simple_dense_net.py`, `data/mnist_datamodule.py` (list hyperparameters, `prepare_data` and
`setup(stage)` that write and read files under `data_dir`). Its configs, LHT's layout
(`model.net`, `model.optimizer`, `model.scheduler`): `tests/machinery/configs/*/zoo_lht.yaml`.

The one change from LHT's files: MNIST would be downloaded, so `prepare_data` writes
scikit-learn's bundled 8x8 digits (111 of them) under `data_dir` instead.
"""
