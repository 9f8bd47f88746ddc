"""The per-kind table: layers grouped by the kind of work, each backend
against the CLBlast backend fastest on that kind, and the verdict in words."""
from compare.report import kinds, tables as report_tables
from compare.results import RunResult, Samples, decode
from nets import MOBILENET_V2, RESNET18, VGG16
from nets.spec import layer_category

from results_factory import FAMILY, small_results_dict


def _layer(name, values):
    return {"name": name, "wall": Samples.of(values).__dict__, "kernel": None, "overhead": None, "steps": []}


def _file(walls: dict) -> RunResult:
    """Three layers (a 3x3 conv, a 1x1 conv, a depthwise conv) and, per backend, each layer's wall values."""
    d = small_results_dict()
    d["net"]["layers"] = [{"name": "a", "kind": "conv", "flops": 9_000_000, "category": "conv 3x3"},
                          {"name": "b", "kind": "conv", "flops": 1_000_000, "category": "conv 1x1"},
                          {"name": "c", "kind": "conv", "flops": 1_000_000, "category": "conv 1x1"},
                          {"name": "d", "kind": "conv", "flops": 500_000, "category": "depthwise 3x3"}]
    template = d["backends"][1]
    d["backends"] = []
    for name, layers in walls.items():
        b = dict(template, name=name, family=FAMILY[name], config=dict(template.get("config") or {}))   # a config each
        b["timing"] = dict(template["timing"], layers=[_layer(n, v) for n, v in zip("abcd", layers)])
        d["backends"].append(b)
    return decode(RunResult, d)


def _jitter(ms):
    return [ms * f for f in (0.98, 0.99, 1.0, 1.01, 1.02)]


def test_each_kind_meets_the_clblast_backend_fastest_on_it_and_the_verdict_says_who_wins():
    res = _file({"clblast": [_jitter(4.0), _jitter(1.0), _jitter(1.0), _jitter(3.0)],
                 "clblast-best": [_jitter(2.0), _jitter(0.5), _jitter(0.5), _jitter(4.0)],
                 "vectorised": [_jitter(1.0), _jitter(2.0), _jitter(2.0), _jitter(1.5)]})
    t = kinds.kind_table(res)
    assert t.categories == ["conv 3x3", "conv 1x1", "depthwise 3x3"] and t.layer_counts == [1, 2, 1]
    assert t.references == ["clblast-best", "clblast-best", "clblast"]
    mine = t.cells[t.names.index("vectorised")]
    assert [round(c.speedup.value, 3) for c in mine] == [2.0, 0.25, 2.0]
    assert mine[1].ms == 4.0 and mine[1].speedup.interval[1] < 1.0      # the two 1x1 layers summed per pass
    said = kinds.verdicts(t)
    assert said[0].startswith("conv 3x3 (1 layer): vectorised is fastest, 2.00x")
    assert said[1].startswith("conv 1x1 (2 layers): **CLBlast wins**: CLBlast at its best (clblast-best) is 2.00x")
    assert "faster than the next, clblast" in said[1]
    assert "no clear winner" not in " ".join(said) and "too noisy" not in " ".join(said)
    headers, rows = report_tables.kind_table(kinds.kind_table(res))
    assert headers[1] == "conv 3x3 (1 layer, 9 MFLOP)" and rows[-1] == ["CLBlast at its best here", "clblast-best",
                                                                       "clblast-best", "clblast"]


def test_a_kind_where_the_intervals_overlap_names_no_winner():
    res = _file({"clblast": [[1.0, 1.5, 2.0, 0.8, 1.2]] * 4, "vectorised": [[1.1, 1.4, 0.9, 1.9, 1.0]] * 4})
    assert all("too noisy to call" in line and "is fastest" not in line for line in kinds.verdicts(kinds.kind_table(res)))


def test_a_file_without_a_clblast_backend_has_no_kind_table():
    assert kinds.kind_table(_file({"vectorised": [_jitter(1.0)] * 4})) is None


def test_layer_categories_of_the_built_in_nets():
    def cats(net):
        return {layer_category(layer, net.in_shape(i)) for i, layer in enumerate(net.layers)}
    assert cats(VGG16) == {"conv 3x3", "pooling", "dense"}
    assert {"conv 7x7", "conv 3x3", "conv 1x1", "add", "pooling", "dense"} <= cats(RESNET18)
    assert {"conv 3x3", "conv 1x1", "depthwise 3x3", "add", "pooling"} <= cats(MOBILENET_V2)


def test_adds_a_backend_folded_into_the_layer_before_are_said_to_be_there_not_timed_as_free():
    res = _file({"clblast": [_jitter(4.0), _jitter(1.0), _jitter(1.0), _jitter(3.0)],
                 "vectorised": [_jitter(1.0), _jitter(2.0), _jitter(2.0), _jitter(0.001)]})
    res.net.layers[3].kind, res.net.layers[3].category = "add", "add"
    res.backend("vectorised").config["residual_adds_fused"] = {"d": "into c's epilogue"}
    t = kinds.kind_table(res)
    cell = t.cells[t.names.index("vectorised")][t.categories.index("add")]
    assert cell.folded and cell.ms is None and cell.speedup is None
    headers, rows = report_tables.kind_table(kinds.kind_table(res))
    assert rows[t.names.index("vectorised")][t.categories.index("add") + 1] == "folded into the layers before"
    said = [line for line in kinds.verdicts(t) if line.startswith("add")]
    assert said == []   # only CLBlast is left timed there: no one to hold it against


def test_depthwise_layers_folded_into_the_1x1_after_are_said_to_be_there():
    res = _file({"clblast": [_jitter(4.0), _jitter(1.0), _jitter(1.0), _jitter(3.0)],
                 "clblast-best": [_jitter(4.5), _jitter(1.1), _jitter(1.1), _jitter(2.0)],
                 "vectorised": [_jitter(1.0), _jitter(2.0), _jitter(2.0), _jitter(0.001)]})
    res.backend("vectorised").config["depthwise_fused"] = {"d": "into e's kernel"}
    t = kinds.kind_table(res)
    cell = t.cells[t.names.index("vectorised")][t.categories.index("depthwise 3x3")]
    assert cell.folded == "after" and cell.ms is None and cell.speedup is None
    headers, rows = report_tables.kind_table(t)
    assert rows[t.names.index("vectorised")][t.categories.index("depthwise 3x3") + 1] == "folded into the layers after"
    said = [line for line in kinds.verdicts(t) if line.startswith("depthwise")]
    assert len(said) == 1 and said[0].endswith(
        "(vectorised folded these into the layers after them: their time is counted there).")


def test_a_folded_layer_has_no_speedup_rate_or_share_of_peak_of_its_own():
    """Its time is ~0 and its work is in the layer it went into: the per-layer speedups (and their
    geometric mean), the utilisation and the run's layer table leave it out and say where it went."""
    from compare import analysis as an, tables
    res = _file({"clblast": [_jitter(4.0), _jitter(1.0), _jitter(1.0), _jitter(3.0)],
                 "vectorised": [_jitter(1.0), _jitter(2.0), _jitter(5.0), _jitter(0.001)]})
    res.backend("vectorised").config["depthwise_fused"] = {"d": "into e's kernel (dw_pw: 2 pixels)"}
    s = an.speedups(res, "clblast")
    assert s.layers[3] == [None]
    assert round(s.geomean[0], 3) == round((4.0 * 0.5 * 0.2) ** (1 / 3), 3)   # three layers, not four
    headers, rows = report_tables.speedup_table(res, "clblast")
    assert rows[3] == ["d", "folded into the layer after"]
    table = tables.layer_table(res, res.backend("vectorised"))
    line = next(row for row in table.splitlines() if row.startswith("d "))
    assert "folded into e's kernel" in line and "2000" not in line


def test_a_kind_folded_only_in_part_is_held_against_clblast_on_the_layers_timed():
    """With the fold chosen by measuring, some depthwise convs stay on their own: the backend's time there
    covers those alone, so CLBlast at its best is timed on the same layers, not on all of the kind."""
    res = _file({"clblast": [_jitter(4.0), _jitter(1.0), _jitter(3.0), _jitter(3.0)],
                 "vectorised": [_jitter(1.0), _jitter(0.5), _jitter(0.001), _jitter(1.5)]})
    res.net.layers[1].category = res.net.layers[2].category = "depthwise 3x3"   # b, c and d: three depthwise
    res.backend("vectorised").config["depthwise_fused"] = {"c": "into e's kernel"}
    t = kinds.kind_table(res)
    k = t.categories.index("depthwise 3x3")
    cell = t.cells[t.names.index("vectorised")][k]
    assert cell.timed == 2 and cell.folded == "after"
    assert cell.ms == 2.0 and round(cell.speedup.value, 3) == 2.0     # b and d: 4.0 ms of clblast's, not 7.0
    headers, rows = report_tables.kind_table(t)
    assert rows[t.names.index("vectorised")][k + 1].endswith("on the 2 not folded into the layers after them")
    said = [line for line in kinds.verdicts(t) if line.startswith("depthwise")]
    lo, hi = cell.speedup.interval
    assert lo > 1.0 and said == [
        f"depthwise 3x3 (3 layers): vectorised folded 1 of these into the layers after them; on the other 2 it is "
        f"2.00x [{lo:.2f}, {hi:.2f}] faster than CLBlast at its best (clblast) on the same layers."]
