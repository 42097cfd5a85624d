"""A registry that refuses a second registration under one name (equimo's tabular/layers/registry.py)."""

REGISTRY = {}


def register(name):
    def add(fn):
        if name in REGISTRY:
            raise ValueError(f"Cannot register '{name}'. It is already registered")
        REGISTRY[name] = fn
        return fn

    return add


def get(name):
    return REGISTRY[name]
