"""The team's models: LightningModules (`classifier`, `regressor`) and the networks they wrap
(`nets`). The example classifies images; replace it with your own (README, "Bring your own
model and data")."""
