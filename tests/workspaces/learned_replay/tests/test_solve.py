import jax.numpy as jnp

from odelike.solve import solve
from odelike.terms import ODETerm


def test_the_term_calls_its_function():
    assert ODETerm(lambda t, y: y + 1).vf(0.0, 1) == 2


def test_decay():
    y = solve(ODETerm(lambda t, y: -y), jnp.ones((3, 5)))
    assert y.shape == (2, 3, 5)
