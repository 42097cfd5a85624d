"""What the fixture workspace tests/workspaces/lsp_basic must produce, shared by the LSP tests."""

# (name, 0-based line of the def/class keyword) for every entrypoint of mixed.py, in order.
MIXED_LENSES = [
    ("Dense", 12),
    ("scale", 28),
    ("Block", 44),
    ("norm", 54),
    ("Head", 63),
    ("power", 71),
    ("Tower", 87),
    ("Tower.Layer", 88),
]
