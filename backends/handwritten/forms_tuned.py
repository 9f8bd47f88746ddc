"""The prepare-time choices of `vectorised` and `vectorised-tiled` measured
once by `compare tune --scope forms` and kept per device (backends/cache.py,
kind 'forms'), so a run on a device with them committed prepares without
compiling and timing every candidate form of every layer (on a bare GPU
that took over a minute for VGG-16's Winograd forms).

A layer found there builds only its recorded form, which is checked once
more against the layer's direct kernel on a random input (winograd.py); a
form that no longer builds or no longer matches is measured at prepare
again, as is every layer not found, and every layer for which this code
offers a form the record was not chosen from (a form added since: the
entry keeps the forms each layer's was chosen from).  The run's config says which way each
layer went.
"""
from __future__ import annotations

from .. import cache, store
from .tiles_tuned import layer_key

KIND = "forms"
SITES = ("winograd",)   # the choices kept; the others (folds, splits, blocks) are cheap at prepare


def form_key(backend: str, batch: int, in_shape, layer) -> str:
    """A layer's key: the backend (its direct kernel differs), then what fixes the layer's kernels."""
    return f"{backend} {layer_key(batch, in_shape, layer)}"


def check_entry(entry, where: str) -> None:
    """One device's entry, as the forms' search writes it (store.Foreign naming what is not): per site, a form
    name per layer key."""
    store.obj(entry, where)
    for site in SITES:
        found = store.need(entry, site, store.obj, where)
        for key, form in found.items():
            if not store.text(form, f"{where}.{site}[{key[:60]!r}]"):
                raise store.Foreign(f"{where}.{site}[{key[:60]!r}] is empty, not a form's name")


class TunedForms(cache.DeviceEntry):
    KIND = KIND

    def chosen(self, site: str, key: str) -> str | None:
        """The form `compare tune` measured fastest for layer `key` at `site`, or None."""
        found = (self.entry or {}).get(site, {}).get(key)
        return found if isinstance(found, str) else None

    def offered(self, key: str) -> list[str] | None:
        """The forms layer `key`'s was chosen from, or None (an entry written before they were kept)."""
        found = (self.entry or {}).get("offered", {})
        forms = found.get(key) if isinstance(found, dict) else None
        return [str(f) for f in forms] if isinstance(forms, list) else None

    def how(self) -> str:
        return f"measured by `compare tune --scope forms` on {str((self.entry or {}).get('tuned', '?'))[:10]}"
