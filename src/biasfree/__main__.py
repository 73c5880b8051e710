"""``python -m biasfree``: the ``biasfree`` command (:mod:`biasfree.app.cli`)."""

from biasfree.app.cli import app

if __name__ == "__main__":
    app(prog_name="biasfree")
