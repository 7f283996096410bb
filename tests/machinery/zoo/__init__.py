"""A zoo of team modules, each written as the Lightning docs write that pattern.

Every file is a LightningModule and its LightningDataModule that know nothing of this project
(none imports it); `lht/` is a project's `src/` as lightning-hydra-template lays it out. The
machinery's contract tests (`tests/machinery/test_zoo*.py`) train, evaluate, predict, resume
and benchmark each of them through the template's entry points. The data are tiny (tens of
samples), so a run takes seconds. Their configs are in
`tests/machinery/configs/{model,data,experiment}/zoo_*.yaml`.
"""
