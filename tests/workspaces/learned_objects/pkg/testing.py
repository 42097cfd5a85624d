"""A key fixture as equinox.internal's ``GetKey``: a dataclass whose ``__init__`` is its own and
takes the seed only, while its fields are the seed, a call count and the key."""

import dataclasses

import jax.random as jr
from jax import Array


@dataclasses.dataclass(eq=False)
class GetKey:
    seed: int
    call: int
    key: Array

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.call = 0
        self.key = jr.PRNGKey(seed)

    def __call__(self) -> Array:
        self.call += 1
        return jr.fold_in(self.key, self.call)
