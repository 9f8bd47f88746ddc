"""Where the scopes' searches run, decided once by the driver and handed
to each scope: Here (this machine's device, --device) or OnFarm (the
workers of a Dask scheduler, --scheduler), whose connection is made once,
within the budget, shared by every scope that spreads there, and closed
by the driver at the end.  A scope asks its place; it never looks at the
request's scheduler itself."""
from __future__ import annotations

from dataclasses import dataclass, field

from nets.errors import UserError

from .address import Address


@dataclass
class Here:
    on_farm = False

    def words(self, request) -> str:
        return request.runtime().info["name"]

    def close(self) -> None:
        pass


@dataclass
class OnFarm:
    address: Address
    every_kind: bool = False   # --devices all: each kind among the workers, into its own store
    on_farm = True
    _farm: object = field(default=None, repr=False)
    _kinds: list = field(default_factory=list, repr=False)

    def words(self, request) -> str:
        return f"the workers of {self.address}"

    def kinds(self, request, seconds: float) -> tuple:
        """(the connected farm.Farm, its kinds tuned): connected the first time asked, within `seconds` (at
        most farm.CONNECT_CAP_S); the kinds: every one (--devices all), else this machine's device's, or
        where this machine has none the only kind there is."""
        if self._farm is None:
            from . import farm
            connected = farm.connect(self.address, seconds)
            try:
                self._kinds = farm.kinds_tuned(connected, _here(request), self.every_kind)
            except BaseException:
                connected.close()
                raise
            self._farm = connected
        return self._farm, self._kinds

    def where(self, kind) -> str:
        """One line: the kind searched and its workers, and who was left out and why."""
        return self._farm.where(kind, self.every_kind)

    def close(self) -> None:
        if self._farm is not None:
            self._farm.close()
            self._farm = None


def _here(request):
    """This machine's device as the farm's kinds are named (None where it has no OpenCL device)."""
    from ..clblast.tuned import clblast_version
    from ..store import DeviceId
    try:
        return DeviceId.of(request.runtime().info, clblast_version())
    except UserError:
        return None


def of(request) -> Here | OnFarm:
    return Here() if request.scheduler is None else OnFarm(request.scheduler, request.every_kind)
