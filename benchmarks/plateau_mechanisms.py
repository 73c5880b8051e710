"""Width or spectrum for conv and attention nets: measured, per init seed (issue 49, item 5; the
numbers are recorded in docs/theory.md §11.5.4). Nothing here is a check: each row prints the
plateau counts of :func:`~biasfree.theory.mechanisms.plateau_count_experiment` and what they
follow, on the saddle-to-saddle claim's tasks (:mod:`biasfree.claims.saddle_to_saddle.mechanisms`):

- ``linear conv``: kernel 2, inputs of length 5, channels 2, 3, 5 at s = (2, ½); s = (2, 2),
  (2, 1), (2, ½) at 3 channels; random init std 1e-2, GD η = 0.1, 600 steps;
- ``ReLU conv``: the spike task, channels 2, 4, 8 at (c₊, c₋) = (2, ½); (2, 2), (2, 1), (2, ½)
  at 4 channels; init std 1e-2, η = 0.1, 3,000 steps;
- ``merged`` / ``separate`` attention: random init std 0.05 (separate: rank-one heads), heads
  1, 2, 4 at Λ = (1, ½); Λ = (1, 1), (1, ½) at 2 heads; N = 8, 2,000 sequences (mirrored),
  η = 0.1, 4,000 steps (merged: 1,000);
- ``aligned`` attention: the claim's aligned heads at w₀ = 0.05·ratio^h, ratio ½ and 1, heads
  1, 2 and the same spectra at 2 heads (one run: the init is not random).

Run: ``python benchmarks/plateau_mechanisms.py [--seeds N]`` (about a minute on 2 cores
with a warm compilation cache).
"""

from __future__ import annotations

import argparse
import functools

from biasfree.claims.saddle_to_saddle.mechanisms import attention_run, linear_conv_run, relu_conv_run, spread
from biasfree.theory.mechanisms import plateau_count_experiment


def _rows(name, make, seeds, widths, spectra, width):
    """The experiment per seed, widths at the last spectrum; and the largest final/initial loss
    ratio of its runs (conv: near 0 when every run learned its task to the end; attention: the
    in-context task's irreducible error keeps it above 0)."""
    reps, left = [], []
    for seed in seeds:
        run = functools.cache(make(seed))
        reps.append(plateau_count_experiment(run, widths, spectra, width=width, spectrum=spectra[-1]))
        left.append(max(float(loss[-1] / loss[0]) for _, loss in (run(*a) for a in
                        [(w, spectra[-1]) for w in widths] + [(width, s) for s in spectra])))
    for seed, r, f in zip(seeds, reps, left, strict=True):
        print(f"{name:18s} seed {seed}: widths {widths} -> {r.width_counts}; spectra at width {width} "
              f"{list(spectra)} -> {r.spectrum_counts}; follows {r.follows}; final/initial loss ≤ {f:.2g}",
              flush=True)
    print(f"{name:18s} spread over seeds: widths ({spread([r.width_counts for r in reps])}), spectra "
          f"({spread([r.spectrum_counts for r in reps])}); follows {[r.follows for r in reps]}", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3, help="init seeds per architecture (ReLU conv: + 2)")
    seeds = range(ap.parse_args(argv).seeds)
    _rows("linear conv", linear_conv_run, seeds, [2, 3, 5], [(2.0, 2.0), (2.0, 1.0), (2.0, 0.5)], 3)
    _rows("ReLU conv", lambda s: relu_conv_run(s, steps=3000), range(len(seeds) + 2), [2, 4, 8],
          [(2.0, 2.0), (2.0, 1.0), (2.0, 0.5)], 4)
    _rows("merged attention", lambda s: attention_run("merged", s, steps=1000), seeds, [1, 2, 4],
          [(1.0, 1.0), (1.0, 0.5)], 2)
    _rows("separate attention", lambda s: attention_run("separate", s, steps=4000), seeds, [1, 2, 4],
          [(1.0, 1.0), (1.0, 0.5)], 2)
    for ratio in (0.5, 1.0):
        _rows(f"aligned, ratio {ratio}", lambda s, r=ratio: attention_run("aligned", ratio=r, steps=4000),
              [0], [1, 2], [(1.0, 1.0), (1.0, 0.5)], 2)


if __name__ == "__main__":
    main()
