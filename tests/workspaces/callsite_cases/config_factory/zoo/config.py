import dataclasses


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    dim: int = 8
    hidden: int = 16
    layers: int = 2

    @classmethod
    def small(cls):
        return cls(dim=4, hidden=8)

    @staticmethod
    def base_1b(layers=3):
        return ModelConfig(dim=16, hidden=32, layers=layers)
