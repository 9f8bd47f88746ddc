"""The zoo survey (issue 36): every image-classification model of
torchvision.models and keras.applications, built with random weights,
exported (ONNX through torch.onnx.export, dynamic batch) or saved (.keras),
then `compare check --backends numpy` on it (the reference against the
float64 oracle, layer by layer and end to end) and our reference's output
against the framework's own on the same input.  One line per model: runs
(PASS, and how far from the framework) or refused, and the refusal's line.

    .venv/bin/python scripts/zoo_survey.py --out docs/zoo.md            # every model
    .venv/bin/python scripts/zoo_survey.py --only resnet18,MobileNetV2   # some
    .venv/bin/python scripts/zoo_survey.py --redo swin_v2_t,NASNetLarge   # these again, the other lines kept
    .venv/bin/python scripts/zoo_survey.py --backends all ...            # every backend (slow on PoCL)
    .venv/bin/python scripts/zoo_survey.py --forms all --only vit_b_16 --out docs/zoo-forms.md
        # torchvision's models as users' exporters write them: opset 17 or 20 or dynamo, a fixed batch of 1 or 2

Needs torchvision (not a dependency of the project: `pip install torchvision`
matching the installed torch, e.g. torchvision 0.28 for torch 2.13) for the
torchvision half; only the model definitions are used, so its compiled
operators are left unregistered (they need a CUDA or CPU build matching
torch's exactly).  Each model is built, exported and checked in a child
process of its own, so memory is given back between models; results are
kept in a JSON file beside the output as they come, and a rerun skips the
models already there (--fresh starts over, --redo forgets the lines of the
models it names).  A model whose two images do not fit this machine's memory
(`compare check` refuses, naming how many do) is checked on the first of
them alone, and its line says so.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
COMPARE = str(Path(PYTHON).with_name("compare"))

# keras.applications' image classifiers (the functions), the input each is built at: the smallest
# each accepts with include_top=False would change the head; with the top and weights=None any size
# from its minimum up is allowed (NASNet fixes 224 and 331)
KERAS_MODELS = {
    "ConvNeXtTiny": 32, "ConvNeXtSmall": 32, "ConvNeXtBase": 32, "ConvNeXtLarge": 32, "ConvNeXtXLarge": 32,
    "DenseNet121": 32, "DenseNet169": 32, "DenseNet201": 32,
    "EfficientNetB0": 32, "EfficientNetB1": 32, "EfficientNetB2": 32, "EfficientNetB3": 32, "EfficientNetB4": 32,
    "EfficientNetB5": 32, "EfficientNetB6": 32, "EfficientNetB7": 32,
    "EfficientNetV2B0": 32, "EfficientNetV2B1": 32, "EfficientNetV2B2": 32, "EfficientNetV2B3": 32,
    "EfficientNetV2S": 32, "EfficientNetV2M": 32, "EfficientNetV2L": 32,
    "InceptionResNetV2": 75, "InceptionV3": 75,
    "MobileNet": 32, "MobileNetV2": 32, "MobileNetV3Small": 32, "MobileNetV3Large": 32,
    "NASNetMobile": 224, "NASNetLarge": 331,
    "ResNet50": 32, "ResNet101": 32, "ResNet152": 32, "ResNet50V2": 32, "ResNet101V2": 32, "ResNet152V2": 32,
    "VGG16": 32, "VGG19": 32, "Xception": 71,
}
# torchvision models that need more than the default 64x64: the input each is exported at
TORCH_SIZES = {"inception_v3": 299, "googlenet": 64, "alexnet": 224, "squeezenet1_0": 64, "squeezenet1_1": 64,
               "vit_b_16": 224, "vit_b_32": 224, "vit_l_16": 224, "vit_l_32": 224, "vit_h_14": 224, "maxvit_t": 224,
               "swin_t": 224, "swin_s": 224, "swin_b": 224, "swin_v2_t": 256, "swin_v2_s": 256, "swin_v2_b": 256,
               "vgg11": 224, "vgg11_bn": 224, "vgg13": 224, "vgg13_bn": 224, "vgg16": 224, "vgg16_bn": 224,
               "vgg19": 224, "vgg19_bn": 224}
TORCH_DEFAULT_SIZE = 64
IMAGES = 2   # the survey's input: two images
FITS = re.compile(r"an input of (\d+) images? fits")   # compare check's refusal for the host's memory


def _torchvision():
    """torchvision.models with its compiled operators left unregistered (only definitions are used)."""
    import types
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    import torchvision.models as models
    return models


def torch_names() -> list[str]:
    """torchvision's classifiers; none where torchvision is not installed (the kept rows stay)."""
    try:
        return list(_torchvision().list_models(module=_torchvision()))
    except ImportError:
        return []


FORMS = ("opset17-b1", "opset17-b2", "opset20-b1", "opset20-b2", "dynamo-b1", "dynamo-b2")


def _export(torch, model, x, path: Path, form: str | None) -> None:
    """`model` to ONNX at `path`: the survey's own form (torch's default opset, a dynamic batch) or `form`,
    one a user's exporter writes: `opsetN-bK` (the TorchScript exporter at opset N, a fixed batch of K) or
    `dynamo-bK` (torch's dynamo exporter, its default opset, a fixed batch of K)."""
    names = {"input_names": ["image"], "output_names": ["out"]}
    if form is None:
        torch.onnx.export(model, torch.from_numpy(x[:1]), str(path), dynamo=False, dynamic_axes={"image": {0: "n"}},
                          **names)
        return
    kind, batch = form.split("-b")
    sample = torch.from_numpy(x[:int(batch)])
    if kind == "dynamo":
        torch.onnx.export(model, (sample,), str(path), dynamo=True, **names)
    else:
        torch.onnx.export(model, sample, str(path), dynamo=False, opset_version=int(kind[len("opset"):]), **names)


def build_torch(name: str, folder: Path, form: str | None = None) -> tuple[str, str]:
    """Model `name` exported to ONNX in `folder` (in `form`, see _export), and PyTorch's output on the survey
    input saved beside it (the form's batch of images where it fixes one)."""
    import warnings

    import numpy as np
    import torch
    models = _torchvision()
    torch.manual_seed(0)
    size = TORCH_SIZES.get(name, TORCH_DEFAULT_SIZE)
    x = np.random.default_rng(0).random((IMAGES, 3, size, size), dtype=np.float32)
    model = _lively(torch, models.get_model(name, weights=None), torch.from_numpy(x)).eval()
    if form is not None:
        x = x[:int(form.split("-b")[1])]
    path = folder / f"{name}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _export(torch, model, x, path, form)
        with torch.no_grad():
            y = model(torch.from_numpy(x)).numpy()
            y64 = model.double()(torch.from_numpy(x).double()).numpy()   # the framework's own float64
    np.save(folder / f"{name}-x.npy", x)
    np.save(folder / f"{name}-y.npy", y)
    np.save(folder / f"{name}-y64.npy", y64)
    return str(path), f"{size}x{size}"


def _lively(torch, model, x):
    """Random batch-norm statistics, and each convolution's and linear layer's weights
    scaled so that its output on `x` has a standard deviation of 1: torchvision's
    own random initialisation shrinks some models' features to almost nothing
    (GoogLeNet's truncated normal of 0.01: the output is the classifier's bias
    alone, and agreeing with it would prove little; ViT's head starts at zeros:
    random here), and He's grows others' (EfficientNet-v2's adds and gates)
    until float32 rounding alone moves the output."""
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                c = mod.num_features
                mod.weight.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
                mod.bias.copy_(torch.rand(c, generator=gen) * 0.2 - 0.1)
                mod.running_mean.copy_(torch.rand(c, generator=gen) * 0.2 - 0.1)
                mod.running_var.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)

        def rescale(mod, inputs, out):   # in forward order, so each sees its inputs already scaled
            std = float(out.std())
            if std > 0:
                mod.weight.div_(std)
                if mod.bias is not None:
                    mod.bias.div_(std)
                return out / std
            return out
        for mod in model.modules():   # a layer initialised to zeros (ViT's head) would zero the output
            if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear)) and not mod.weight.any():
                mod.weight.copy_(torch.randn(mod.weight.shape, generator=gen))
        hooks = [mod.register_forward_hook(rescale) for mod in model.modules()
                 if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear))]
        model.eval()(x)
        for h in hooks:
            h.remove()
    return model


def build_keras(name: str, folder: Path) -> tuple[str, str]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import numpy as np
    keras.utils.set_random_seed(0)
    size = KERAS_MODELS[name]
    model = getattr(keras.applications, name)(weights=None, input_shape=(size, size, 3))
    x = np.random.default_rng(0).random((IMAGES, 3, size, size), dtype=np.float32) * 255   # pixels, as Keras takes them
    path = folder / f"{name}.keras"
    model.save(path)
    y = np.asarray(model(x.transpose(0, 2, 3, 1), training=False))
    keras.config.set_dtype_policy("float64")   # the same model and weights in float64: the framework's own
    try:
        model64 = getattr(keras.applications, name)(weights=None, input_shape=(size, size, 3))
        model64.set_weights([w.astype(np.float64) for w in model.get_weights()])
        y64 = np.asarray(model64(x.transpose(0, 2, 3, 1).astype(np.float64), training=False))
    finally:
        keras.config.set_dtype_policy("float32")
    np.save(folder / f"{name}-x.npy", x)
    np.save(folder / f"{name}-y.npy", y.transpose(0, 3, 1, 2) if y.ndim == 4 else y)
    np.save(folder / f"{name}-y64.npy", y64.transpose(0, 3, 1, 2) if y64.ndim == 4 else y64)
    return str(path), f"{size}x{size}"


def one(source: str, name: str, backends: str, folder: Path, form: str | None = None) -> dict:
    """Build, export and check one model (in this process; `form`: torchvision's export form, see _export):
    its survey line as a dict."""
    t0 = time.perf_counter()
    try:
        path, size = build_torch(name, folder, form) if source == "torchvision" else build_keras(name, folder)
    except Exception as exc:  # noqa: BLE001 - the framework's own failure is recorded, not ours
        return {"source": source, "model": name, "status": "not built",
                "why": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"}
    row = {"source": source, "model": name, "input": size, **({"form": form} if form else {})}
    if form:
        row["images"] = int(form.split("-b")[1])
    check, errors = _check(path, folder / f"{name}-x.npy", backends, folder, name)
    fewer = FITS.search(errors[-1]) if check.returncode == 2 and errors else None
    if fewer and 1 <= int(fewer.group(1)) < IMAGES:   # the host's memory holds fewer: the first of them
        import numpy as np
        images = int(fewer.group(1))
        np.save(folder / f"{name}-x{images}.npy", np.load(folder / f"{name}-x.npy")[:images])
        check, errors = _check(path, folder / f"{name}-x{images}.npy", backends, folder, name)
        row["images"] = images
    if check.returncode == 2:
        row.update(status="refused", why=errors[-1][len("error: "):].replace(path + ": ", "") if errors
                   else check.stderr.strip().splitlines()[-1])
    else:
        row.update(status="PASS" if check.returncode == 0 else "FAIL", backends=_statuses(check.stdout))
        row["vs_framework"] = _against_framework(folder, name, row.get("images", IMAGES))
        row["framework_float32"] = _framework_float32(folder, name, source, row.get("images", IMAGES))
        if check.returncode != 0:
            row["why"] = _why_failed(check.stdout) or "; ".join(errors) or check.stdout.strip().splitlines()[-1]
            conditioned = _conditioning(check.stdout, row["framework_float32"], source)
            if conditioned:
                row.update(status="ill-conditioned", why=conditioned)
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def _check(path: str, x_path: Path, backends: str, folder: Path, name: str):
    """`compare check` of the model at `path` on the input at `x_path`: the finished process and its error lines."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    check = subprocess.run([COMPARE, "check", "--net", path, "--backends", backends, "--input", str(x_path),
                            "--save-outputs", str(folder / f"{name}-outs")],
                           capture_output=True, text=True, env=env, cwd=folder)
    return check, [line for line in check.stderr.splitlines() if line.startswith("error:")]


def _why_failed(stdout: str) -> str:
    """For a reference that fails end to end only: its error, and that every layer alone passes."""
    for line in stdout.splitlines():
        words = line.split()
        if len(words) >= 6 and words[0] == "numpy" and words[1] == "FAIL":
            try:
                worst = float(words[5])
            except ValueError:
                return ""
            if worst < 1e-4:
                return (f"end to end only (rel L2 {words[2]}): every layer alone matches the oracle (worst "
                        f"{words[4]} {words[5]}); the random weights make its logits so large that float32 "
                        f"rounding alone moves the output")
    return ""


def _framework_float32(folder: Path, name: str, source: str, images: int = IMAGES) -> float | None:
    """The framework's own float32 output against its float64 one (the same model and weights) on the
    first `images` images: how far float32 rounding alone moves this net's output, the yardstick of ours."""
    import numpy as np
    y64_path = folder / f"{name}-y64.npy"
    if not y64_path.exists():
        return None
    y64 = np.load(y64_path).astype(np.float64)[:images]
    y = np.load(folder / f"{name}-y.npy").astype(np.float64)[:images].reshape(y64.shape)
    return float(np.linalg.norm(y - y64) / max(np.linalg.norm(y64), 1e-30))


def _conditioning(stdout: str, framework_f32: float | None, source: str) -> str:
    """One line where the reference fails end to end only and the framework's own float32 output is as far
    from its float64 one: the net's conditioning in float32, not an error of ours; else ''."""
    if framework_f32 is None or not _why_failed(stdout):
        return ""
    ours = next((float(line.split()[2]) for line in stdout.splitlines()
                 if line.split()[:2] == ["numpy", "FAIL"]), None)
    if ours is None or ours > 2 * framework_f32:
        return ""
    who = "PyTorch" if source == "torchvision" else "Keras"
    return (f"float32 itself: {who}'s own float32 output is {framework_f32:.1e} from its float64 one (rel L2), "
            f"ours {ours:.1e} from the float64 oracle, and every layer alone matches the oracle")


def _statuses(stdout: str) -> dict:
    """backend -> its check column, from `compare check`'s table."""
    out, table = {}, False
    for line in stdout.splitlines():
        if line.startswith("backend") and "check" in line and "rel L2" in line:
            table = True
            continue
        if table and line.strip() and not line.startswith(("---", " ")):   # not a wrapped cell's next line
            found = re.match(r"(\S+)(?:\s+\([^)]*\))?\s+(\S+)", line)   # a mode in brackets may follow the name
            if found:
                out[found.group(1)] = found.group(2)
        elif table and not line.strip():
            table = False
    return out


def _against_framework(folder: Path, name: str, images: int = IMAGES) -> float | None:
    import numpy as np
    ours = folder / f"{name}-outs" / "numpy.npy"
    if not ours.exists():
        return None
    y = np.load(folder / f"{name}-y.npy").astype(np.float64)[:images]
    got = np.load(ours).astype(np.float64).reshape(y.shape)
    return float(np.linalg.norm(got - y) / max(np.linalg.norm(y), 1e-30))


def render_forms(rows: list[dict], backends: str) -> str:
    """The page of a --forms survey: a line per model and export form."""
    ran = [r for r in rows if r["status"] in ("PASS", "ill-conditioned")]
    lines = ["# torchvision's models as a user's exporter writes them", "",
             f"Each model with random weights, exported to ONNX in the form after its name (opsetN-bK: "
             f"`torch.onnx.export` at opset N with a fixed batch of K; dynamo-bK: `dynamo=True`, its default "
             f"opset, a fixed batch of K), then `compare check --backends {backends}` on K images (the reference "
             f"against the float64 oracle, layer by layer and end to end), and our reference's output against "
             f"PyTorch's own (relative L2).  Made by `scripts/zoo_survey.py --forms all --only MODELS --out "
             f"docs/zoo-forms.md`; every model in the default form: [docs/zoo.md](zoo.md).", "",
             f"{len(ran)} of {len(rows)} run.", "",
             "| model | input | result | vs PyTorch | why refused |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        images = r.get("images", IMAGES)
        vs = "" if r.get("vs_framework") is None else f"{r['vs_framework']:.1e}"
        why = r.get("why", "").replace("|", "\\|")
        result = r["status"]
        if r.get("backends") and backends != "numpy":
            result += " (" + ", ".join(f"{b} {s}" for b, s in r["backends"].items()) + ")"
        lines.append(f"| {r['model']} ({r['form']}) | {r.get('input', '')}, {images} image{'s' * (images > 1)} | "
                     f"{result} | {vs} | {why} |")
    return "\n".join(lines) + "\n"


def render(rows: list[dict], backends: str) -> str:
    ran = [r for r in rows if r["status"] in ("PASS", "ill-conditioned")]
    if any(r.get("form") for r in rows):
        return render_forms(rows, backends)
    lines = ["# The classification zoo on our importers", "",
             f"Every image-classification model of torchvision.models and keras.applications, with random "
             f"weights, exported to ONNX (torch.onnx.export, dynamic batch; or in the form after its name: "
             f"opsetN-bK the TorchScript exporter at opset N with a fixed batch of K, dynamo-bK torch's dynamo "
             f"exporter) or saved as .keras, then "
             f"`compare check --backends {backends}` on two images of the size given (one where two do not fit "
             f"this machine's memory: the input column says so; the reference against "
             f"the float64 oracle, layer by layer and end to end), and our reference's output against the "
             f"framework's own (relative L2).  Made by `scripts/zoo_survey.py`.", "",
             f"{len(ran)} of {len(rows)} run" + ("; the rest are refused, each in one line naming what we lack.  "
                                                  if len(ran) < len(rows) else ".  ") +
             "'ill-conditioned': the net's random weights make its output so sensitive that the framework's own "
             "float32 output is as far from its float64 one as ours from the float64 oracle (the line says "
             "both); no layer of ours is wrong there.", "",
             "| source | model | input | result | vs framework | why refused |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        vs = f"{r['vs_framework']:.1e}" if r.get("vs_framework") is not None else ""
        result = r["status"]
        if r.get("backends") and backends != "numpy":
            result += " (" + ", ".join(f"{b} {s}" for b, s in r["backends"].items()) + ")"
        why = r.get("why", "").replace("|", "\\|")
        size = r.get("input", "")
        if r.get("images", IMAGES) != IMAGES:
            size += f", {r['images']} image" + ("s" if r["images"] > 1 else "")
        model = r["model"] + (f" ({r['form']})" if r.get("form") else "")
        lines.append(f"| {r['source']} | {model} | {size} | {result} | {vs} | {why} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="docs/zoo.md")
    p.add_argument("--only", help="comma-separated model names")
    p.add_argument("--backends", default="numpy")
    p.add_argument("--fresh", action="store_true", help="forget the results kept so far")
    p.add_argument("--redo", help="comma-separated model names whose kept results are forgotten (run again)")
    p.add_argument("--timeout-s", type=float, default=900, help="per model")
    p.add_argument("--forms", help=f"torchvision's models in these export forms instead of the survey's own "
                                   f"(comma-separated, or all: {','.join(FORMS)}); write --out elsewhere")
    p.add_argument("--form", help=argparse.SUPPRESS)
    p.add_argument("--one", nargs=2, metavar=("SOURCE", "MODEL"), help=argparse.SUPPRESS)
    p.add_argument("--folder", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one[0], args.one[1], args.backends, Path(args.folder), args.form)))
        return 0
    forms = [None] if not args.forms else list(FORMS) if args.forms == "all" else args.forms.split(",")
    if set(forms) - {None} - set(FORMS):
        p.error(f"--forms takes {', '.join(FORMS)} or all")
    kept_path = Path(args.out).with_suffix(".json")
    kept = {} if args.fresh or not kept_path.exists() else {(r["source"], r["model"], r.get("form")): r
                                                            for r in json.loads(kept_path.read_text())}
    redo = set(args.redo.split(",")) if args.redo else set()
    kept = {key: row for key, row in kept.items() if key[1] not in redo}
    wanted = set(args.only.split(",")) if args.only else None
    todo = [("torchvision", n, f) for n in torch_names() for f in forms] + \
        ([("keras", n, None) for n in KERAS_MODELS] if not args.forms else [])
    unknown = redo - {name for _, name, _ in todo}
    if unknown:   # its kept line would be lost, and no new one made
        p.error(f"--redo {','.join(sorted(unknown))}: not a model here (torchvision's need torchvision installed)")
    todo = [t for t in todo if wanted is None or t[1] in wanted]
    for source, name, form in todo:
        if (source, name, form) in kept:
            continue
        with tempfile.TemporaryDirectory(prefix="zoo-") as folder:
            try:
                done = subprocess.run([PYTHON, __file__, "--one", source, name, "--folder", folder,
                                       "--backends", args.backends] + (["--form", form] if form else []),
                                      capture_output=True, text=True, timeout=args.timeout_s, cwd=ROOT)
                last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
                row = json.loads(last) if last.startswith("{") else {
                    "source": source, "model": name, "status": "not built",
                    "why": (done.stderr.strip().splitlines() or ["no output"])[-1]}
            except subprocess.TimeoutExpired:
                row = {"source": source, "model": name, "status": "not built",
                       "why": f"took over {args.timeout_s:.0f} s"}
        if form:
            row["form"] = form
        kept[(source, name, form)] = row
        print(f"{source} {name}{f' {form}' if form else ''}: {row['status']} {row.get('why', '')}", flush=True)
        kept_path.write_text(json.dumps(list(kept.values()), indent=1))
    order = {t: i for i, t in enumerate([("torchvision", n, f) for n in torch_names() for f in forms] +
                                         [("keras", n, None) for n in KERAS_MODELS])}
    rows = sorted(kept.values(), key=lambda r: order.get((r["source"], r["model"], r.get("form")), 1 << 30))
    Path(args.out).write_text(render(rows, args.backends))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
