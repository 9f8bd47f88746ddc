"""What names a device in every store: its name, platform and driver, and
the version of the library whose figures a store holds for it (CLBlast's
tuning, tinygrad's choices), so nothing carries over to another device,
driver or version.

One device alone (no library) keys the per-device cache files
(`key`: 'platform | name | driver'); with a library it names a store's
folder (`slug`) and is written into the store (`to_json`), the library's
field under its own name, as the committed files have it."""
from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceId:
    name: str
    platform: str
    driver: str
    clblast: str | None = None    # the CLBlast library (its file name and version) the figures are of
    tinygrad: str | None = None   # tinygrad's version (its kernels' keys mean nothing to another)

    @classmethod
    def of(cls, info: dict, clblast: str | None = None, tinygrad: str | None = None) -> "DeviceId":
        """The device an OpenCL device's info describes, with the library named, where one is."""
        return cls(info["name"], info["platform"], info["driver"], clblast, tinygrad)

    def with_tinygrad(self, version: str) -> "DeviceId":
        """The same device, under tinygrad `version` (and no CLBlast)."""
        return dataclasses.replace(self, clblast=None, tinygrad=version)

    @property
    def key(self) -> str:
        """The device alone, as the per-device cache files key their entries."""
        return f"{self.platform} | {self.name} | {self.driver}"

    @property
    def libraries(self) -> dict[str, str]:
        return {k: v for k, v in (("clblast", self.clblast), ("tinygrad", self.tinygrad)) if v is not None}

    @property
    def slug(self) -> str:
        """A folder's name: the device's, readable, and a hash of everything that names it."""
        text = "|".join((self.name, self.platform, self.driver, *self.libraries.values()))
        name = re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")[:40] or "device"
        return f"{name}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"

    def to_json(self) -> dict:
        return {"name": self.name, "platform": self.platform, "driver": self.driver, **self.libraries}
