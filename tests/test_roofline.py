"""The roofline: each layer's arithmetic intensity and roof worked out by
hand from the shapes recorded in small hand-made results, the share of the
roof each backend reached, the table and the plot, and why a file has none."""
from compare.report import tables as rt
from compare.report import roofline
from compare.report import render_report
from compare.results import LayerInfo, RunResult, decode, load_results, write_results
from results_factory import small_results_dict

PNG = b"\x89PNG\r\n\x1a\n"


def shaped(batch=1, flops=(2_000_000, 1_000_000), device_type="CPU", bandwidth=20.0):
    """small_results with shapes: peak 10 GFLOP/s and 20 GB/s, so the ridge is at 0.5 FLOP/byte.
    Layer a moves 2,500 + 1,250 + 6,250 floats per image (+ weights once); b 500,000 in and out, no weights."""
    d = small_results_dict()
    d["device"]["type"] = device_type
    d["net"]["batch"] = batch
    a, b = d["net"]["layers"]
    a.update(in_shape=[1, 50, 50], out_shape=[10, 25, 25], params=1250, flops=flops[0])
    b.update(in_shape=[500_000], out_shape=[500_000], params=0, flops=flops[1])
    d["peak"]["bandwidth_gbs"] = bandwidth
    return d


def test_bytes_and_intensity_of_a_layer():
    a = LayerInfo("a", "conv", 2_000_000, in_shape=[1, 50, 50], out_shape=[10, 25, 25], params=1250)
    assert roofline.layer_bytes(a, 1) == 40_000                  # 4 x (2,500 + 1,250 + 6,250)
    assert roofline.layer_bytes(a, 4) == 145_000                 # 4 x (4 x 2,500 + 1,250 + 4 x 6,250)
    assert roofline.intensity(a, 1) == 50.0                      # 2,000,000 / 40,000
    assert roofline.layer_bytes(LayerInfo("old", "conv", 10), 1) is None   # a version-1 file: no shapes
    assert roofline.roof(10.0, 20.0, 0.25) == 5.0                # memory-bound: 0.25 x 20
    assert roofline.roof(10.0, 20.0, 50.0) == 10.0               # compute-bound: the peak


def test_roofline_table_of_one_file():
    headers, rows = rt.roofline_table([roofline.of(decode(RunResult, shaped()))])
    # a: 50 FLOP/byte, roof 10; numpy 2 MFLOP in 2 ms = 1 GFLOP/s = 10%, clblast 4 ms 5%, vectorised 1 ms 20%
    # b: 1 MFLOP / 4 MB = 0.25 FLOP/byte, roof 0.25 x 20 = 5; numpy 0.5 ms = 2 GFLOP/s = 40%, clblast 2 ms 10%,
    #    vectorised 1 ms 20%
    assert headers == ["layer", "batch", "FLOP/byte", "roof GFLOP/s", "numpy %", "clblast %", "vectorised %"]
    assert rows == [["a", "1", "50.00", "10.0", "10.0", "5.0", "20.0"],
                    ["b", "1", "0.25", "5.0", "40.0", "10.0", "20.0"]]


def test_a_larger_batch_moves_the_layer_with_weights_to_the_right():
    big = decode(RunResult, shaped(batch=4, flops=(8_000_000, 4_000_000)))
    small = decode(RunResult, shaped())
    headers, rows = rt.roofline_table([roofline.of(big), roofline.of(small)])
    # a at batch 4: 8 MFLOP / 145,000 bytes = 55.17 FLOP/byte; numpy 8 MFLOP in 2 ms = 4 GFLOP/s = 40% of 10
    # b at batch 4: 4 MFLOP / 16 MB = 0.25, roof 5; numpy 4 MFLOP in 0.5 ms = 8 GFLOP/s = 160%: above the
    # roof, as a CPU's caches can take it (the bytes are those from memory at the least, the bandwidth memory's)
    assert rows == [["a", "1", "50.00", "10.0", "10.0", "5.0", "20.0"],
                    ["a", "4", "55.17", "10.0", "40.0", "20.0", "80.0"],
                    ["b", "1", "0.25", "5.0", "40.0", "10.0", "20.0"],
                    ["b", "4", "0.25", "5.0", "160.0", "40.0", "80.0"]]


def test_only_backends_on_the_device_are_points():
    line = roofline.of(decode(RunResult, shaped(device_type="GPU")))
    assert line.backends == ["clblast", "vectorised"]   # numpy runs on the host CPU, not on this GPU
    headers, _ = rt.roofline_table([line])
    assert headers[4:] == ["clblast %", "vectorised %"]


def test_why_a_file_has_no_roofline():
    no_bw = decode(RunResult, shaped(bandwidth=None))
    assert roofline.of(no_bw) is None
    assert "has no memory bandwidth" in roofline.missing(no_bw)
    d = shaped()
    d["peak"] = None
    assert roofline.missing(decode(RunResult, d)).startswith("the file holds no peak")
    unshaped = roofline.of(decode(RunResult, small_results_dict()))   # layers without shapes
    assert unshaped.layers == [] and unshaped.unshaped == ["a", "b"]
    assert rt.roofline_table([unshaped]) is None


def test_the_report_draws_one_roofline_per_net_and_device(tmp_path):
    files = []
    for name, d in (("one.json", shaped()), ("four.json", shaped(batch=4, flops=(8_000_000, 4_000_000))),
                    ("old.json", small_results_dict("Old GPU")), ("nobw.json", shaped(bandwidth=None))):
        d["device"]["name"] = {"old.json": "Old GPU", "nobw.json": "Other GPU"}.get(name, "Test GPU")
        write_results(tmp_path / name, decode(RunResult, d))
        files.append(str(tmp_path / name))
    written = render_report([load_results(f) for f in files], files, str(tmp_path / "out"))
    assert "](rooflines.md)" in (tmp_path / "out" / "report.md").read_text()
    md = (tmp_path / "out" / "rooflines.md").read_text()
    rooflines = [p for p in written if "roofline" in p and p.endswith(".png")]
    assert len(rooflines) == 1   # Test GPU's; the others have none, and say why
    with open(rooflines[0], "rb") as f:
        assert f.read(8) == PNG
    table_rows = [[c.strip() for c in line.strip("|").split("|")] for line in md.splitlines() if line.startswith("|")]
    assert ["a", "4", "55.17", "10.0", "40.0", "20.0", "80.0"] in table_rows
    assert f"Left out, as the results file records no layer shapes (a version-1 file): `{files[2]}` (a, b)." in md
    assert f"No roofline from `{files[3]}`: its peak (given by the test) has no memory bandwidth" in md
