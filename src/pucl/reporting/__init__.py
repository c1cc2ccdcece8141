"""Run reporting: comparison tables of MLflow runs, the evaluate stage's files and the
pipeline's figures."""
