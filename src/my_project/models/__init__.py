"""The LightningModule (`classifier`) and the networks it can wrap (`nets`)."""
