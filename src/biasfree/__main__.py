"""``python -m biasfree``: the ``biasfree`` command (:mod:`biasfree.app.cli`)."""

from biasfree.app.cli import app

app(prog_name="biasfree")
