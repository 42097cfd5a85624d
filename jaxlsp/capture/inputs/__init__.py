"""Where a capture's inputs come from when no profile gives them: the workspace's own call sites
and examples (``autoinputs``), the signatures learned from running them (``signatures``), and the
runs that learn them (``learning``)."""
