"""The capture worker: runs in the user's interpreter; imports only the stdlib, jax and user code."""
