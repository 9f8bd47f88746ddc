"""What `compare run` and `check` share once their options are read: the files they read and write kept
apart, the Plan made and executed with a progress line, the outputs saved where --save-outputs asks."""
from __future__ import annotations

import numpy as np

import backends

from ..files import Output, check_apart, check_writable
from ..keep import Keeper
from ..models import SUFFIXES
from ..progress import Progress
from ..results import RunResult
from ..runner import Outputs, Plan, execute, steps
from ..terminal import wrap
from .plan import Asked, build_plan


def inputs(asked: Asked) -> list[tuple[str, str | None]]:
    """The files a run, check or sweep reads: the model file (a built-in net names none), the input, the weights."""
    net = asked.net if asked.net.lower().endswith(SUFFIXES) else None
    files = [("--net", net), ("--input", asked.input), ("--weights", asked.weights)]
    if asked.data:   # the weights trained on the digits, which lenet reads unless given others
        from ..digits import TRAINED_WEIGHTS
        files.append(("--data's trained weights", str(TRAINED_WEIGHTS)))
    return files


def outputs_apart(asked: Asked, out: str | None, save_outputs: str | None) -> None:
    """Before any work: neither --out nor a file --save-outputs writes may be a file the command reads."""
    outputs = [Output("--out", out)] if out else []
    if save_outputs:
        names = ["input", "reference"] + backends.parse_names(asked.backends)
        outputs.append(Output("--save-outputs", save_outputs, tuple(f"{n}.npy" for n in names)))
    check_apart(outputs, inputs(asked))


def plan_and_execute(asked: Asked, mode: str, save_outputs: str | None,
                     quiet: bool) -> tuple[RunResult, Plan, list[str | None]]:
    """The results, the plan they ran and the problems of the outputs saved (None: saved where asked)."""
    if save_outputs:
        check_writable(save_outputs, "--save-outputs", folder=True)
    plan = build_plan(asked, mode)
    progress = Progress(in_place=False, every_s=float("inf")) if quiet else Progress()

    def say(line: str) -> None:   # a line that stays, before the tables
        progress.done()
        if not quiet:
            print(wrap(line, indent="  ") + "\n", flush=True)
    progress.expect(steps(plan))
    try:
        results, outputs = execute(plan, progress, say)
    finally:
        progress.done()
    problems = [_save_outputs(outputs, plan, save_outputs)] if save_outputs else []
    if asked.data:
        from ..digits import add_accuracy
        add_accuracy(results, outputs)
    return results, plan, problems


def _save_outputs(outputs: Outputs, plan: Plan, directory: str) -> str | None:
    """The arrays as .npy files in `directory`, or kept elsewhere: then the line that says where."""
    def writer(array):
        def write(tmp):
            with open(tmp, "wb") as f:   # a file, not a name: np.save would add .npy to the staged name
                np.save(f, array, allow_pickle=False)
        return write
    arrays = {"input": plan.x, "reference": outputs.reference, **outputs.backends}
    keeper = Keeper(directory)
    for name, array in arrays.items():
        if array is not None:
            keeper.write(f"{name}.npy", writer(array))
    return keeper.problem("--save-outputs", "outputs")
