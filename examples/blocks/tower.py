from . import ResidualBlock


class Tower(ResidualBlock):
    """Derives a Linen module through the package's re-export: it gets a lens."""

    depth: int = 4
