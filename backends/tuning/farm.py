"""A farm of devices for every scope's search: a Dask distributed cluster
whose workers each hold one or more OpenCL devices (`compare tune
--scheduler tcp://HOST:PORT`).  This module asks the workers what they
hold (`probe`, run on each), groups their devices by kind (the same name,
platform, driver and CLBlast library: store.DeviceId), and picks the kind
tuned: this machine's device, or the only kind there is, or each kind
(`--devices all`).  The scopes then run their work on the places of that
kind (clblast/farm.py: CLBlast's children; tinygrad/farm.py: tinygrad's
kernels); this process stays the store's only writer.

On a machine with several GPUs, start one worker per GPU, each pinned to
its device by PYOPENCL_CTX=P:D (GPUs of one model share a name: only the
index tells them apart), so each search runs on its own card.

Dask is an optional extra (`farm`): only the tuning's farm modules import it.
"""
from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass

from nets.errors import UserError

from ..store import DeviceId
from .address import Address, probe as probe_address
from .clblast.space import DeviceLimits

CONNECT_CAP_S = 30.0   # the longest the connection may take, within the tune's own budget


# -- on the workers
def probe() -> list[dict]:
    """This worker's OpenCL devices: each one's index, what names its kind, its limits (run by client.run)."""
    from ..clblast.tuned import clblast_version
    from ..opencl.runtime import all_devices, device_info
    from ..peers.tinygrad_device import tinygrad_version
    try:
        found = all_devices()
    except Exception as exc:  # noqa: BLE001 - no OpenCL here is an answer: no device
        return [{"error": str(exc)[:200]}]
    if os.environ.get("PYOPENCL_CTX"):   # a worker started for one device of its machine uses that one only
        from ..opencl.runtime import select_device
        chosen = select_device().int_ptr
        found = [d for d in found if d[2].int_ptr == chosen]
    version, out = clblast_version(), []
    for index, _, dev in found:
        info = device_info(dev)
        out.append({"index": index, "device": DeviceId.of(info, version).to_json(), "gpu": "GPU" in info["type"],
                    "limits": [info["local_mem_bytes"], info["max_work_group_size"], info["max_work_item_sizes"]],
                    "cores": os.cpu_count() or 1, "tinygrad": tinygrad_version()})
    return out


# -- on the client
@dataclass(frozen=True)
class Place:
    """One worker's device of the kind tuned."""

    worker: str     # its address
    index: str      # the device's 'P:D' there
    gpu: bool
    cores: int
    threads: int = 1     # the worker's threads: its children side by side at most
    alone: bool = True   # the worker's only device of the kind
    tinygrad: str | None = None   # the worker's tinygrad version (None: not installed)
    label: str = ""      # the worker's --name, where it was given one

    @property
    def name(self) -> str:
        """What the records call it: the worker (its name and address), and the device where the worker has
        several of the kind."""
        who = f"{self.label} ({self.worker})" if self.label and self.label != self.worker else self.worker
        return who if self.alone else f"{who} device {self.index}"


@dataclass
class Kind:
    """A device kind among the workers, and where it is."""

    device: DeviceId
    limits: DeviceLimits
    gpu: bool
    places: list[Place]

    def words(self) -> str:
        return f"{self.device.name} ({self.device.driver}, {self.device.clblast})"


@dataclass
class Farm:
    """A connected client, the device kinds of its workers (their order kept), and the workers without any
    OpenCL device, with why."""

    address: Address
    client: object
    kinds: list[Kind]
    bare: dict[str, str]

    def where(self, kind: Kind, every_kind: bool) -> str:
        """One line: the kind searched and its workers, and who was left out and why."""
        mine = {p.worker for p in kind.places}
        others = [f"{p.worker} ({k.words()})" for k in self.kinds if k is not kind for p in k.places
                  if p.worker not in mine]
        return (f"farm: {kind.words()} on {len(kind.places)} worker(s): {', '.join(p.name for p in kind.places)}"
                + (f"; left out, another device: {'; '.join(others)}" if others and not every_kind else "")
                + (f"; left out, no OpenCL device: {', '.join(self.bare)}" if self.bare else ""))

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # noqa: BLE001 - a scheduler gone meanwhile: nothing to close
            pass


def connect(address: Address, budget_s: float) -> Farm:
    """A client of the scheduler at `address`, connected within the tune's budget (at most CONNECT_CAP_S),
    and what its workers hold; a UserError in one line where no scheduler answers there."""
    within = max(1.0, min(budget_s, CONNECT_CAP_S))
    start = time.monotonic()
    probe_address(address, within)   # a silent or foreign listener is refused before Dask reads a byte
    import distributed
    left = max(1.0, within - (time.monotonic() - start))
    try:
        client = distributed.Client(str(address), timeout=left)
    except (OSError, TimeoutError) as exc:
        raise UserError(f"--scheduler {address}: the scheduler did not take a client within {left:.0f} s "
                        f"({type(exc).__name__}); check it is up with `dask scheduler`") from None
    try:
        found = client.run(probe)
        workers = client.scheduler_info().get("workers", {})
        threads = {w: int(info.get("nthreads", 1)) for w, info in workers.items()}
        # a name given with `dask worker --name` (a LocalCluster numbers its workers: no name worth saying)
        labels = {w: str(info.get("name", "")) for w, info in workers.items() if not str(info.get("name", "")).isdigit()}
    except Exception as exc:  # noqa: BLE001 - a worker that cannot run our code
        client.close()
        raise UserError(f"--scheduler {address}: the workers could not say what devices they hold "
                        f"({type(exc).__name__}: {str(exc)[:200]}); start them from this project's environment "
                        f"(`.venv/bin/dask worker {address}`)") from None
    kinds: dict[DeviceId, Kind] = {}
    bare: dict[str, str] = {}
    for worker, devices in sorted(found.items()):
        for d in devices:
            if "error" in d:
                bare[worker] = d["error"]
                continue
            dev = DeviceId(**d["device"])
            local, group, items = d["limits"]
            kind = kinds.setdefault(dev, Kind(dev, DeviceLimits(int(local), int(group), tuple(items)), d["gpu"], []))
            kind.places.append(Place(worker, d["index"], d["gpu"], int(d["cores"]), threads.get(worker, 1),
                                     tinygrad=d.get("tinygrad"), label=labels.get(worker, "")))
        if not devices:
            bare[worker] = "no OpenCL device"
    for kind in kinds.values():   # a worker with several devices of the kind runs children on each
        many = {p.worker for p in kind.places if sum(q.worker == p.worker for q in kind.places) > 1}
        kind.places = [dataclasses.replace(p, alone=p.worker not in many) for p in kind.places]
    return Farm(address, client, list(kinds.values()), bare)


def kinds_tuned(farm: Farm, here: DeviceId | None, every_kind: bool) -> list[Kind]:
    """The kinds to tune: every one (--devices all), else this machine's device's (`here`), or where this
    machine has none the only kind there is; a UserError naming what the workers hold otherwise."""
    if not farm.kinds:
        raise UserError(f"--scheduler {farm.address}: no worker has an OpenCL device"
                        + (f" ({'; '.join(f'{w}: {why}' for w, why in farm.bare.items())})" if farm.bare else ""))
    if every_kind:
        return farm.kinds
    names = "; ".join(f"{k.words()} on {len(k.places)}" for k in farm.kinds)
    if here is None:
        if len(farm.kinds) == 1:
            return farm.kinds
        raise UserError(f"--scheduler: this machine has no OpenCL device to name the one tuned, and the workers "
                        f"hold several kinds ({names}): tune each with --devices all")
    for kind in farm.kinds:
        if kind.device == here:
            return [kind]
    raise UserError(f"--scheduler: no worker has this machine's device {here.name} ({here.driver}, "
                    f"{here.clblast}); the workers hold {names}: name --devices all to tune those")
