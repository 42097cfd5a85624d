"""Where a capture's inputs come from, decided once per trace (``plan``: ``--from``, the recipe's
profile, a learned call, else auto); when no profile gives them: the workspace's own call sites
and examples (``autoinputs``), the signatures learned from running them (``signatures``), and the
runs that learn them (``learning``)."""
