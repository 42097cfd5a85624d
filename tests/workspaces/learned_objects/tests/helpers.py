import jax.random as jr
from jax import Array
from pkg.operators import Diagonal
from pkg.testing import GetKey


def make_diagonal(getkey: GetKey, diag: Array) -> Diagonal:
    return Diagonal(diag + 0.1 * jr.normal(getkey(), diag.shape))
