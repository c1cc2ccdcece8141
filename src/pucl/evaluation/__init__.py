"""Metrics of a classifier: with labels (metrics), from P and U alone (label_free), and
the paired difference of two classifiers on the same rows (paired)."""
