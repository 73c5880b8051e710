"""The linear-attention figure says where a reader would draw a wrong conclusion (issue 47): the
sigmoid is the population prediction, and plain Adam's exact curve at the tiny preset holds only
because the mirror pairs' gradient sums cancel exactly there; the caveats are drawn legibly, inside
the figure, clear of the panels and of each other."""

import dataclasses

import pytest
from figure_checks import texts_outside
from tiny_runs import shared_folder, tiny_run

from biasfree import store
from biasfree.claims import get
from biasfree.claims.linear_attention.figure import CAVEAT_SIZE, caveats

NAME = "linear-attention"


@pytest.fixture(scope="module")
def result(tmp_path_factory, worker_id):
    out = shared_folder(tmp_path_factory, worker_id)
    tiny_run(out, NAME)
    return store.load(out / NAME)


def test_the_figure_draws_its_caveats_clear_of_the_panels(result):
    fig = get(NAME).figure(result)
    assert not texts_outside(fig)  # draws it
    notes = [t for ax in fig.axes for t in ax.texts if t.get_fontsize() == CAVEAT_SIZE]
    drawn = " ".join(" ".join(t.get_text().split()) for t in notes)
    assert "the sigmoid is the population prediction" in drawn
    assert result.metrics["merged_off_twin_adam_plain"] == 0.0  # tiny: the pair sums cancel exactly
    assert ("plain Adam (red) is exact here only because the mirror pairs' gradient sums cancel "
            "exactly") in drawn
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in notes]
    panels = [ax.get_tightbbox(renderer) for ax in fig.axes if ax.axison]
    assert len(boxes) == 3 and len(panels) == 3
    for i, b in enumerate(boxes):
        assert not any(b.overlaps(p) for p in panels)  # under the panels, not on them
        assert not any(b.overlaps(c) for c in boxes[i + 1:])


def test_plain_adam_that_left_the_twin_is_said_so(result):
    moved = dataclasses.replace(result, metrics=result.metrics | {"merged_off_twin_adam_plain": 0.39,
                                                                  "merged_gap_adam_plain": 0.05})
    adam = caveats(moved)[1]
    assert adam.startswith("Plain Adam left the twin here (off-twin blocks 0.39, loss gap 0.05)")
