import jax


def sampler(key, x):
    key, sub = jax.random.split(key)
    return key, x + jax.random.normal(sub, x.shape)
