"""What tinygrad's schedule search (BEAM) chose on one device, as a small
file that can be committed: written by `compare tune --scope tinygrad`
(backends/tuning/tinygrad/), read by the `tinygrad` backend's searched modes.

tinygrad caches its search in an sqlite file (CACHEDB) that also holds
every compiled binary (95 MB after two nets on the H100).  Only the
choices travel: per kernel, the list of optimisations the search applied,
under the fields tinygrad keys its own cache with (the kernel's AST hash,
the width, whether the search timed a reduced global size, the renderer's
suffix).  A backend or a search re-seeds them into a fresh CACHEDB.

One folder per device under the cache (COMPARE_CACHE_DIR moves it), named
by the device, its driver and tinygrad's version (an AST hash means
nothing to another version); in it `choices.json`: the choices, and per
net (name, batch, width) the distinct kernels of its pass with what each
took under tinygrad's hand-coded heuristics, so the depth (kernels
searched of the net's) is known without opening the device.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import cache, store
from ..store import DeviceId, JsonFile, whole

SCHEMA = "clblast-compare/tinygrad-search"
VERSION = 1
FOLDER = "tinygrad-search"
DEFAULT_WIDTH = 2
# the ways a pass of a net is built, each compiling its own kernels: the peer's walk of the layers, and
# tinygrad's ONNX recipe (the `searched-onnx` mode); a survey says which it covered
WALK, ONNX_RECIPE = "walk", "onnx"
EVERY_WAY = (WALK, ONNX_RECIPE)


def net_key(name: str, batch: int) -> str:
    return f"{name} batch {batch}"


@dataclass(frozen=True)
class KernelKey:
    """The fields tinygrad's own cache keys a search by, less the device string (the folder is the device)."""

    width: int
    ast: str               # hex of the kernel AST's hash
    allow_test_size: bool
    suffix: str

    @property
    def text(self) -> str:
        return f"{self.width}|{self.ast}|{int(self.allow_test_size)}|{self.suffix}"

    @classmethod
    def parse(cls, text: str) -> "KernelKey":
        width, ast, allow, suffix = text.split("|", 3)
        return cls(int(width), ast, allow == "1", suffix)


@dataclass
class Choice:
    """One kernel's search: the optimisations chosen (tinygrad's Opt as [op name, axis, arg]), and what
    it cost and gained (the kernel alone, ms, as tinygrad's search times it: under the heuristics, and as
    chosen, the faster of the search's best and the heuristics' schedule)."""

    key: KernelKey
    opts: list
    kernel: str                    # tinygrad's name of the kernel, for people
    search_s: float
    heuristic_ms: float | None
    searched_ms: float | None
    settings: dict = field(default_factory=dict)   # tinygrad's BEAM_* variables in force, where set
    when: str = ""
    kept: str = "search"           # or 'heuristics': tinygrad's hand-coded schedule timed faster than the search's
    where: str = ""                # who searched it: this machine's process, or a farm's worker

    def to_json(self) -> dict:
        d = asdict(self)
        d["key"] = self.key.text
        return d

    @classmethod
    def from_json(cls, d, where: str = "choice") -> "Choice":
        """One kernel's choice, each field of its type (Foreign naming the first that is not)."""
        d = store.obj(d, where)
        key = store.need(d, "key", store.text, where)
        try:
            parsed = KernelKey.parse(key)
        except ValueError:
            raise store.Foreign(f"{where}.key {key[:60]!r} is not width|ast|test size|suffix") from None
        opts = [store.array(o, f"{where}.opts[{i}]") for i, o in enumerate(store.need(d, "opts", store.array, where))]
        settings = d.get("settings") or {}
        return cls(parsed, opts, store.need(d, "kernel", store.text, where),
                   store.need(d, "search_s", store.number, where),
                   store.number(d.get("heuristic_ms"), f"{where}.heuristic_ms", True),
                   store.number(d.get("searched_ms"), f"{where}.searched_ms", True),
                   dict(store.obj(settings, f"{where}.settings")), store.text(d.get("when", ""), f"{where}.when"),
                   store.text(d.get("kept", "search"), f"{where}.kept"),
                   store.text(d.get("where", ""), f"{where}.where"))


@dataclass
class Survey:
    """The distinct kernels of one net's pass at one width, in the order the pass compiles them:
    (key, tinygrad's name, ms under the heuristics or None where it could not be timed), over the ways
    of building the pass it covered (a survey from before the ONNX recipe covers the walk only)."""

    net: str
    width: int
    kernels: list = field(default_factory=list)
    ways: tuple = (WALK,)

    @property
    def name(self) -> str:
        return f"{self.net} width {self.width}"

    def covers(self, ways=EVERY_WAY) -> bool:
        return set(ways) <= set(self.ways)


@dataclass
class Choices:
    device: DeviceId
    kernels: dict = field(default_factory=dict)   # KernelKey.text -> Choice
    nets: dict = field(default_factory=dict)      # Survey.name -> Survey

    def widths(self) -> list[int]:
        return sorted({c.key.width for c in self.kernels.values()})

    def depth(self, net: str, width: int) -> tuple[int, int] | None:
        """(kernels searched, distinct kernels) of `net` ('lenet batch 100') at `width`; None before a survey."""
        survey = self.nets.get(Survey(net, width).name)
        if survey is None:
            return None
        return sum(1 for key, _, _ in survey.kernels if key in self.kernels), len(survey.kernels)

    def depth_words(self, net: str, width: int) -> str:
        found = self.depth(net, width)
        if found is None:
            return f"{net}: not surveyed at width {width} (`compare tune --scope tinygrad` has not run it here)"
        done, total = found
        rest = ("" if self.nets[Survey(net, width).name].covers() else
                " (the walk's; tinygrad's ONNX recipe's kernels not surveyed yet)")
        return f"{net}: {done} of {total} distinct kernels searched at width {width}{rest}"

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "version": VERSION, "device": self.device.to_json(),
                "kernels": [c.to_json() for c in self.kernels.values()],
                "nets": [{"net": s.net, "width": s.width, "kernels": [list(k) for k in s.kernels], "ways": list(s.ways)}
                         for s in self.nets.values()]}

    @classmethod
    def from_json(cls, d, device: DeviceId) -> "store.Parsed[Choices]":
        """The choices of a file's JSON, each entry checked: Foreign where the file is not a version VERSION
        file of `device`; the entries not of the schema left out and counted."""
        d = store.obj(d, "the file")
        if d.get("schema") != SCHEMA or d.get("version") != VERSION:
            raise store.Foreign(f"not a version {VERSION} {SCHEMA} file")
        theirs = store.need(d, "device", store.obj, "the file")
        try:
            same = DeviceId(**theirs) == device
        except TypeError:
            same = False
        if not same:
            raise store.Foreign(f"a file of another device ({str(theirs)[:80]}), not of {device.name}")
        for key in ("kernels", "nets"):
            if key not in d and whole(d):   # a file cut short may lose its last fields; a whole one has them
                raise store.Foreign(f"the file has no {key!r}")
        kernels = store.entries(store.array(d.get("kernels", []), "kernels"), Choice.from_json, "kernels")
        nets = store.entries(store.array(d.get("nets", []), "nets"), _survey, "nets")
        choices = cls(device, {c.key.text: c for c in kernels.value}, {s.name: s for s in nets.value})
        return store.Parsed(choices, kernels.dropped + nets.dropped)


def _survey(d, where: str) -> Survey:
    d = store.obj(d, where)
    kernels = []
    for i, k in enumerate(store.need(d, "kernels", store.array, where)):
        at = f"{where}.kernels[{i}]"
        if len(store.array(k, at)) != 3:
            raise store.Foreign(f"{at} holds {len(k)} values, not (key, name, ms)")
        kernels.append((store.text(k[0], at), store.text(k[1], at), store.number(k[2], at, True)))
    ways = tuple(store.text(w, f"{where}.ways") for w in store.array(d.get("ways", [WALK]), f"{where}.ways"))
    return Survey(store.need(d, "net", store.text, where), store.need(d, "width", store.whole_number, where),
                  kernels, ways)


class ChoiceStore:
    """The choices file of one device (backends/store/: locked, written whole)."""

    def __init__(self, device: DeviceId, root: Path | None = None):
        self.device = device
        self.folder = (root or cache.cache_dir()) / FOLDER / device.slug
        self.path = self.folder / "choices.json"

    @property
    def _file(self) -> JsonFile[Choices]:
        # made when asked, not kept: a ChoiceStore is pickled to the search's child and a farm's workers
        return JsonFile(self.path, self._parse, self._kept, Choices.to_json)

    def _parse(self, data) -> "store.Parsed[Choices]":
        return Choices.from_json(data, self.device)

    def load(self) -> Choices:
        """What was chosen so far; empty where there is no file.  A damaged or foreign file is set aside in one
        line, never overwritten: what could be read of it is kept and written back, and the search goes on
        from there (afresh where nothing could be kept)."""
        got = self._file.load()
        return got if got is not None else Choices(self.device)

    @staticmethod
    def _kept(got: "Choices | None") -> str:
        if got is None or not (got.kernels or got.nets):
            return "nothing in it could be kept, its kernels are searched afresh"
        return f"the choices of {len(got.kernels)} kernels and the surveys of {len(got.nets)} nets kept"

    def save(self, choices: Choices) -> Path:
        """Merged under the folder's lock with what is on disk (another search of the same device, on this
        machine or a farm's client, may have written since this one loaded), then written whole: an
        interrupt leaves the last good file, and no writer loses another's choices.  `choices` gains what
        the file held."""
        def merged(there: "Choices | None") -> Choices:
            for key, choice in (there.kernels if there else {}).items():
                choices.kernels.setdefault(key, choice)
            for name, survey in (there.nets if there else {}).items():
                choices.nets.setdefault(name, survey)
            return choices
        self._file.update(merged)
        return self.path
