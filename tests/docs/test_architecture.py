"""docs/architecture.md's layer table cannot drift from the code or from the
import-linter contract (pyproject.toml's `[tool.importlinter]`):

* its layer numbers group the packages exactly as the `layers` contract does,
  in the same order;
* its "imports from pyocc" column is what each package imports (at module or
  function level; the contract's ignored imports, each waiting for another
  branch, excluded);
* its "imports outside pyocc" column names each of xDSL, numpy, onnx,
  llvmlite, cuda-pathfinder and onnxruntime exactly when the package imports it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
TEXT = (ROOT / "docs" / "architecture.md").read_text()
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
LAYERS_CONTRACT = next(c for c in CONTRACTS if c["type"] == "layers")
EXTERNAL = {"xDSL": "xdsl", "numpy": "numpy", "onnx": "onnx", "llvmlite": "llvmlite",
            "cuda-pathfinder": "cuda", "onnxruntime": "onnxruntime"}


def table_rows() -> list[tuple[int, str, set[str], set[str]]]:
    """(layer, module, pyocc imports, external imports) per row of the layer table."""
    section = TEXT.split("## The layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| ") or not cells[0].isdigit():
            continue
        layer, package, _what, internal, external = cells
        module = package.strip("`").removesuffix("/").removesuffix(".py").replace("/", ".")
        names = lambda cell: set() if cell == "—" else {n.strip() for n in cell.split(",")}  # noqa: E731
        rows.append((int(layer), module, {f"pyocc.{n}" for n in names(internal)},
                     {EXTERNAL[n] for n in names(external)}))
    return rows


ROWS = table_rows()


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    g = grimp.build_graph("pyocc", include_external_packages=True)
    for expression in LAYERS_CONTRACT.get("ignore_imports", []):
        importer, imported = (s.strip() for s in expression.split("->"))
        g.remove_import(importer=importer, imported=imported)
    return g


def test_the_table_is_there() -> None:
    assert len(ROWS) >= 15


def test_layers_match_the_contract() -> None:
    in_doc: dict[int, set[str]] = {}
    for layer, module, _, _ in ROWS:
        in_doc.setdefault(layer, set()).add(module)
    doc_layers = [in_doc[n] for n in sorted(in_doc)]
    contract_layers = [{m.strip() for m in layer.split("|")} for layer in LAYERS_CONTRACT["layers"]]
    assert doc_layers == contract_layers, "docs/architecture.md's layer numbers differ from pyproject.toml's contract"


@pytest.mark.parametrize("row", ROWS, ids=[row[1] for row in ROWS])
def test_import_columns_match_the_code(row: tuple[int, str, set[str], set[str]], graph: grimp.ImportGraph) -> None:
    _, module, internal, external = row
    packages = {m for _, m, _, _ in ROWS}
    imports = {p for p in packages - {module} if graph.direct_import_exists(importer=module, imported=p, as_packages=True)}
    assert internal == imports, f"{module}: the table says it imports {sorted(internal)}, the code {sorted(imports)}"
    outside = {e for e in EXTERNAL.values() if e in graph.modules
               and graph.direct_import_exists(importer=module, imported=e, as_packages=True)}
    assert external == outside, f"{module}: the table says it imports {sorted(external)}, the code {sorted(outside)}"
