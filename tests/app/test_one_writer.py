"""One writer per result folder (issue 48 item 6): saves of one folder by many processes at
once all succeed and leave one complete result; a second ``biasfree run`` into the same
``--out`` waits for the first and reuses its result, so the experiment runs once; a claim
whose process is gone is taken over.

The concurrent saves run in child processes that import the store alone (a stub ``biasfree``
package, no JAX), so eight of them start in well under a second each.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from biasfree import store
from biasfree.app.claim import claim, claim_path, holder

SRC = Path(store.__file__).parent
TESTS = Path(__file__).resolve().parents[1]

SAVER = textwrap.dedent("""
    import json, sys, time, types
    from pathlib import Path
    pkg = types.ModuleType("biasfree")  # the store and the results only: no JAX in the child
    pkg.__path__ = [sys.argv[1]]
    sys.modules["biasfree"] = pkg
    import numpy as np
    from biasfree import store
    from biasfree.results import Result, at_most

    out, seconds, me = sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    res = Result("toy", me, {"w": 2}, {"m": float(me)}, {"ok": at_most(0.0, 1.0, "Zero <= one.")},
                 {"w": np.arange(1000.0) + me})
    doc = json.dumps(store.result_json(res, 0.0)).encode()  # store.save's files, its library
    writers = {"result.json": lambda fh: fh.write(doc),  # versions read once, not per save
               "arrays.npz": lambda fh: np.savez(fh, **res.arrays)}
    print("ready", flush=True)
    go = Path(sys.argv[5])
    while not go.exists():  # every child starts saving at the same moment, once all have started
        time.sleep(0.002)
    errors, saves, start = [], 0, time.time()
    while time.time() < start + seconds:
        saves += 1
        try:
            store.write_folder(out, "toy", writers)  # what store.save does after building its files
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}")
    print(json.dumps({"saves": saves, "errors": errors}))
""")


def test_concurrent_saves_of_one_folder_all_succeed_and_leave_one_whole_result(tmp_path):
    """On main, 8 processes saving for 3 s raised FileNotFoundError (the folder moved aside by
    another save between the exists() and the rename) or ENOTEMPTY (another's folder renamed
    in between our two renames) in about 1 save in 30."""
    n, seconds, go = 8, 3.0, tmp_path.parent / f"{tmp_path.name}.go"
    procs = [subprocess.Popen([sys.executable, "-c", SAVER, str(SRC), str(tmp_path), str(seconds), str(i),
                               str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(n)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()[-2000:]
    go.write_text("go")
    docs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err[-2000:]
        docs.append(json.loads(out))
    errors = [e for d in docs for e in d["errors"]]
    saves = sum(d["saves"] for d in docs)
    assert saves >= 2 * n, f"only {saves} saves: the children did not overlap"
    assert not errors, f"{len(errors)} of {saves} concurrent saves failed: {errors[:3]}"
    res = store.load(tmp_path / "toy")  # one complete result, one child's, arrays and JSON alike
    assert res.arrays["w"][0] == res.seed and res.metrics["m"] == res.seed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toy"]  # nothing left aside


def test_a_claim_held_elsewhere_is_waited_for_with_one_line_naming_its_holder(tmp_path):
    logs, held, release = [], threading.Event(), threading.Event()

    def hold():
        with claim(tmp_path, "computing", name="toy"):
            held.set()
            release.wait(30)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(30)
    timer = threading.Timer(0.5, release.set)
    timer.start()
    t0 = time.monotonic()
    with claim(tmp_path, "computing", logs.append, name="toy") as path:
        waited = time.monotonic() - t0
        assert holder(path)["pid"] > 0
    t.join()
    assert waited >= 0.4, "the second claim went ahead while the first was held"
    assert len(logs) == 1 and f"is computing {tmp_path / 'toy'}: waiting for it" in logs[0], logs
    assert "process " in logs[0] and "since" in logs[0]
    assert not claim_path(tmp_path, "toy").exists()  # a released claim leaves nothing


def test_a_stale_claim_is_taken_over_at_once(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    path = claim_path(tmp_path, "toy")
    path.write_text(json.dumps({"pid": dead.pid, "host": "h", "since": time.time() - 60,
                                "command": "biasfree run toy"}))  # what a killed run leaves
    logs = []
    t0 = time.monotonic()
    with claim(tmp_path, "computing", logs.append, name="toy"):
        assert time.monotonic() - t0 < 5
        assert holder(path)["pid"] != dead.pid
    assert len(logs) == 1 and "taking over the stale claim" in logs[0] and f"process {dead.pid}" in logs[0]


RUNNER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    from toys import toy_experiment
    from biasfree.claims import REGISTRY
    from biasfree.claims.base import config
    from biasfree.results import Result, at_most, config_dict

    out, calls, computing, release, wait_for = (Path(a) for a in sys.argv[2:7])

    @config
    class Toy:
        width: int = 2

    def run(cfg, seed=0, progress=None):
        with open(calls, "a") as fh:
            fh.write(f"{os.getpid()}\\n")
        computing.write_text(str(os.getpid()))
        while not release.exists():  # the test lets it finish
            time.sleep(0.05)
        return Result("toy", seed, config_dict(cfg), {"w": 1.0},
                      {"ok": at_most(0.0, 1.0, "Zero is at most one.")}, {"w": np.arange(2.0)})

    REGISTRY["toy"] = toy_experiment("toy", "a toy that runs until released", run, Toy,
                                     {"tiny": Toy(), "paper": Toy()})
    while str(wait_for) != "-" and not wait_for.exists():  # the second run starts once the first computes
        time.sleep(0.05)
    from biasfree.app.cli import app
    app(["run", "toy", "--preset", "tiny", "--out", str(out)])
""")


@pytest.mark.xdist_group("subprocess")
def test_two_runs_into_the_same_out_compute_it_once(tmp_path):
    """The first run computes (and holds its claim until released); the second, started while
    the first computes, waits with a line naming the first's process, then skips the result
    the first saved. On main both computed it."""
    out, calls, computing, release = (tmp_path / n for n in ("out", "calls", "computing", "release"))
    procs = []
    for wait_for in ("-", computing):
        err = (tmp_path / f"err{len(procs)}").open("w")
        procs.append((subprocess.Popen([sys.executable, "-c", RUNNER, str(TESTS), str(out), str(calls),
                                        str(computing), str(release), str(wait_for)],
                                       stdout=subprocess.PIPE, stderr=err, text=True), err))
    first, second = procs[0][0], procs[1][0]
    t0 = time.monotonic()
    try:
        while "waiting for it" not in (tmp_path / "err1").read_text():
            assert first.poll() is None and second.poll() is None, (tmp_path / "err1").read_text()[-2000:]
            assert not calls.exists() or len(calls.read_text().split()) < 2, "both runs computed it"
            assert time.monotonic() - t0 < 120, "the second run never reached the claim"
            time.sleep(0.1)
    finally:
        release.write_text("go")
        for p, err in procs:
            try:
                p.communicate(timeout=120)
            finally:
                p.kill()
                err.close()
    texts = [(tmp_path / f"err{i}").read_text() for i in range(2)]
    assert first.returncode == 0 and second.returncode == 0, texts
    assert calls.read_text().split() == [str(first.pid)], "the experiment ran once, in the first run"
    second_err = " ".join(texts[1].split())
    assert f"process {first.pid}" in second_err and f"is computing {out / 'toy'}" in second_err
    assert "toy skipped: saved result has the same config" in second_err
    assert store.load(out / "toy").passed and sorted(p.name for p in out.iterdir()) == ["toy"]
