from .blocks import *  # noqa: F403
