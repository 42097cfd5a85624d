"""Call-site inference, import-free: where the workspace calls a target (``finder``), each call read
into plain data (``calls``, ``sites``), what its argument expressions are worth (``literals``,
``values``, ``namespaces``), written as recipe specs (``specs``), and which examples reach a
definition (``reach``, ``importchain``)."""
