"""A small model zoo laid out like a real repository: a package, its tests, scripts."""

from zoo.resnet import ResNet, ResNet18, ResNetBlock

__all__ = ["ResNet", "ResNet18", "ResNetBlock"]
