"""Where a capture's inputs come from, decided once per trace (``plan``: ``--from``, the recipe's
profile, a learned call, else auto from the workspace's own call sites and examples), the call
signatures learned by running those examples (``signatures``), and the runs that learn them
(``learning``)."""
