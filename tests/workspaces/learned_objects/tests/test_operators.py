import jax.numpy as jnp
from pkg.operators import Diagonal, Sum, materialise
from pkg.testing import GetKey

from tests.helpers import make_diagonal


def test_diagonal():
    assert materialise(Diagonal(jnp.ones(3))).shape == (3, 3)


def test_sum():
    operator = Sum(make_diagonal(GetKey(7), jnp.ones(4)), Diagonal(jnp.arange(4.0)))
    assert materialise(operator).shape == (4, 4)
