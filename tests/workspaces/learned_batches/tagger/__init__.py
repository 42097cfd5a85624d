"""Taggers of every kind, called by the tests with NumPy arrays."""
