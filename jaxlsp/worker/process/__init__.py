"""The process side: the worker's entry points (a fresh process, in-process), the capture
pipeline from request to result, warming, and the warm spare's fork server. The top room: it
may import every other; none imports it."""
