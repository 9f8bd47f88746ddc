"""tinygrad's search loop surveys a net again when its committed survey does not cover every way the
peer builds the pass (a survey written before tinygrad's ONNX recipe covered the walk only), and not
when it does; the depth says what a survey left out.  A searcher of our own stands in for the device."""
import json

from backends.peers.tinygrad_choices import EVERY_WAY, WALK, Choice, ChoiceStore, Choices, KernelKey, Survey
from backends.store import DeviceId
from backends.tuning.budget import Budget, Steps
from backends.tuning.request import Request
from backends.tuning.tinygrad.loop import search
from nets import get_net

DEVICE = DeviceId("a GPU", "a platform", "1.0", tinygrad="0.14.0")
NET = "lenet batch 100"
WALKED, RECIPES = "2|aa|0|", "2|bb|0|"


class OneDevice:
    """What the loop asks of a searcher: the pass's kernels by both ways, and a choice per kernel."""

    name = "here"

    def __init__(self):
        self.surveyed = 0
        self.searched = []

    def survey(self, net, batch, width, seconds):
        self.surveyed += 1
        return Survey(NET, width, [(WALKED, "r_walk", 0.2), (RECIPES, "r_recipe", 0.3)], EVERY_WAY)

    def search(self, key, seconds):
        self.searched.append(key)
        return Choice(KernelKey.parse(key), [["LOCAL", 0, 4]], "k", 1.0, 0.3, 0.1)


def _old_file(store: ChoiceStore) -> None:
    """A choices file as the search wrote it before the recipe: every kernel of the walk searched, no `ways`."""
    choices = Choices(DEVICE, {WALKED: Choice(KernelKey.parse(WALKED), [], "r_walk", 1.0, 0.2, 0.1)},
                      {"x": Survey(NET, 2, [(WALKED, "r_walk", 0.2)])})
    data = choices.to_json()
    for survey in data["nets"]:
        del survey["ways"]
    store.path.parent.mkdir(parents=True)
    store.path.write_text(json.dumps(data))


def test_a_survey_from_before_the_recipe_is_made_again_and_its_new_kernel_searched(tmp_path):
    store = ChoiceStore(DEVICE, tmp_path)
    _old_file(store)
    old = store.load()
    assert old.nets[Survey(NET, 2).name].ways == (WALK,)
    assert old.depth(NET, 2) == (1, 1)
    assert "ONNX recipe's kernels not surveyed yet" in old.depth_words(NET, 2)
    device = OneDevice()
    request = Request([get_net("lenet")], ["tinygrad"])
    first = search(request, store, [device], Budget(100, Steps()))
    assert device.surveyed == 1 and device.searched == [RECIPES], (device.surveyed, device.searched)
    assert first.depths == [f"{NET}: 2 of 2 distinct kernels searched at width 2"]
    again = search(request, store, [device], Budget(100, Steps()))   # covered now: nothing to survey or search
    assert device.surveyed == 1 and device.searched == [RECIPES] and again.searched_now == 0
    assert store.load().nets[Survey(NET, 2).name].covers()
