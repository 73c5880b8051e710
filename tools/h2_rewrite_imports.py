"""One-off migration for the lead at merge time (issue 20, H2): rewrite imports of names that
moved out of core.nets / core.data / _validate into their new core modules.

    python3 tools/h2_rewrite_imports.py src tests benchmarks   # idempotent; then `ruff check --fix`

(``from ..core.nets import init_gaussian, forward`` becomes one import line per new home.)

Delete this file once main is merged.
"""

import re
import sys
from pathlib import Path

HOME = {
    "layers": "AbstractLayer Layer Params check_net is_net scale_params",
    "inits": "init_gaussian init_pairs init_rank_one pair_up from_arrays pad_hidden balanced_units",
    "twin": "slope_factor linear_twin",
    "nets": "forward hidden odd_part even_part beta_eff beta_eff_is_exact end_to_end_linear depth "
            "widths has_bias leaky_relu check_alpha effective_rank",
    "data": "Dataset check_data gaussian_inputs symmetrize asymmetric_half label_data orthogonal_data",
    "targets": "linear_target teacher_matrix sine_target product_target abs_target xor_target "
               "make_dataset Target",
    "moments": "Whitened whiten input_covariance cross_covariance MomentData moment_data",
    "symmetry": "mirror_violation is_symmetric asymmetry",
    "real_data": "RealData load_data one_hot",
}
WHERE = {n: m for m, names in HOME.items() for n in names.split()}
PATTERN = (r"^(?P<ind>[ \t]*)from (?P<pre>\.+core|biasfree\.core{local})\.(?P<mod>nets|data|real_data)"
           r" import (?P<names>\([^)]*\)|[^\n]*)$")
IMPORT = re.compile(PATTERN.format(local=""), re.M)
IMPORT_IN_CORE = re.compile(PATTERN.format(local="|"), re.M)  # `from .nets import` inside core/ only


def rewrite(text: str, pattern: re.Pattern) -> str:
    def sub(m):
        names = [n.strip() for n in m["names"].strip("()").replace("\n", " ").split(",") if n.strip()]
        groups: dict[str, list[str]] = {}
        for n in names:
            groups.setdefault(WHERE.get(n.split(" as ")[0], m["mod"]), []).append(n)
        out = []
        for mod in sorted(groups):
            line = f"{m['ind']}from {m['pre']}.{mod} import {', '.join(groups[mod])}"
            if len(line) > 110:
                body = ",\n".join(f"{m['ind']}    {n}" for n in groups[mod])
                line = f"{m['ind']}from {m['pre']}.{mod} import (\n{body},\n{m['ind']})"
            out.append(line)
        return "\n".join(out)

    return pattern.sub(sub, text)


for root in sys.argv[1:]:
    for path in Path(root).rglob("*.py"):
        text = path.read_text()
        new = rewrite(text, IMPORT_IN_CORE if path.parent.name == "core" else IMPORT)
        if new != text and path.name != Path(__file__).name:
            path.write_text(new)
            print("rewrote", path)
