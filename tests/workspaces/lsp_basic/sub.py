from pkg import Base
from pkg.base import Base as DirectBase


class ViaPackage(Base):
    depth: int = 2


class ViaModule(DirectBase):
    pass
