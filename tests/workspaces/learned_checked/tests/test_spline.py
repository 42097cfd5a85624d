import jax.numpy as jnp

from checked.spline import Linear


def test_interpolates_between_knots():
    x = jnp.linspace(0.0, 1.0, 8)
    f = Linear(x, x**2)
    out = f(jnp.linspace(0.0, 1.0, 5))
    assert out.shape == (5,)
