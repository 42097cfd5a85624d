"""Flax Linen models for costs, backward attribution and residuals (tests of issue 18)."""

import flax.linen as nn
import jax
import jax.numpy as jnp


class MLP(nn.Module):
    hidden: int = 8

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(self.hidden)(x)
        x = nn.relu(x)
        return nn.Dense(4)(x)


class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        return jnp.tanh(nn.Dense(16)(x))


class Stack(nn.Module):
    remat: bool = False
    policy: str | None = None

    @nn.compact
    def __call__(self, x):
        policy = getattr(jax.checkpoint_policies, self.policy) if self.policy else None
        block = nn.remat(Block, policy=policy) if self.remat else Block
        for _ in range(3):
            x = block()(x)
        return nn.Dense(4)(x)
