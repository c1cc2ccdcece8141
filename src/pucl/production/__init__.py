"""The production cycle: the tracked dataset (datastore), watching arriving batches
(monitoring) and scoring with a trained model (serving)."""
