"""The model: blocks over embedded tokens."""

import flax.linen as nn

from tinylm.layers import Block, Config, rms_norm


class Transformer(nn.Module):
    config: Config
    vocab: int = 64

    @nn.compact
    def __call__(self, tokens):
        x = nn.Embed(self.vocab, self.config.width)(tokens)
        for _ in range(self.config.layers):
            x = Block(self.config)(x)
        return nn.Dense(self.vocab)(rms_norm(x))
