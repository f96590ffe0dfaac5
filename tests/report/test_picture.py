"""The plan as a picture (svg/html) and the peak explanation, on hand-made
timelines (exact expectations) and through `pyocc plan` on a light model."""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from pyocc.report.explain import explain_peak
from pyocc.report.picture import nice_step, render_html, render_svg
from pyocc.report.timeline import BufferBox, OpBox, Timeline
from tests.conftest import light_model_path
from tests.tools.inprocess import run_tool

SVG = "{http://www.w3.org/2000/svg}"


def small_timeline(placement: str = "planned") -> Timeline:
    """Three ops; `a` (100 B) read by ops 1 and 2, `b` (50 B) by op 2, and a
    buffer whose name needs escaping (10 B, written by op 2, read by none)."""
    ops = [OpBox(0, "dnn.conv", [0], []), OpBox(1, "dnn.unary(relu)", [1], [0]),
           OpBox(2, "dnn.binary(add)", [2], [0, 1])]
    buffers = [
        BufferBox(0, "a", 100, 0, 0, 2, [1, 25], "f32", 0, [1, 2]),
        BufferBox(1, "b", 50, 100, 1, 2, [1, 12], "f32", 1, [2]),
        BufferBox(2, 'x<&"y', 10, 150, 2, 2, [], "f32", 2, []),
    ]
    return Timeline("m<1>.onnx", "pool", "auto:greedy-by-size", ops, buffers, pool_bytes=160,
                    lower_bound_bytes=160, naive_bytes=160, placement=placement)


def buffer_rects(root: ET.Element) -> list[ET.Element]:
    return [r for r in root.iter(f"{SVG}rect") if r.get("class") == "buffer"]


def test_svg_is_xml_with_one_rect_per_buffer_and_both_lines() -> None:
    root = ET.fromstring(render_svg(small_timeline()))
    rects = buffer_rects(root)
    assert [r.get("id") for r in rects] == ["b0", "b1", "b2"]
    marks = [line for line in root.iter(f"{SVG}line") if line.get("class") == "mark"]
    assert len(marks) == 2  # lower bound and pool size
    texts = " ".join("".join(t.itertext()) for t in root.iter(f"{SVG}text"))
    assert "lower bound 160 B" in texts and "pool size 160 B" in texts
    assert "address in the pool (B)" in texts  # a tiny pool is drawn in bytes, not 0.00 MiB
    assert "m<1>.onnx" in texts  # the title, unescaped by the parser
    assert "peak: op #2" in texts
    # The escaped name survives as the tooltip's text.
    assert 'x<&"y: 10 B' in "".join(rects[2].find(f"{SVG}title").itertext())


def test_rectangles_sit_where_the_plan_puts_them() -> None:
    root = ET.fromstring(render_svg(small_timeline()))
    a, b, _ = buffer_rects(root)
    # a spans ops 0..2 and bytes 0..100; b ops 1..2, bytes 100..150: same
    # right edge, b starts one op later and sits right on top of a.
    assert float(a.get("x")) < float(b.get("x"))
    assert abs(float(a.get("x")) + float(a.get("width")) - float(b.get("x")) - float(b.get("width"))) < 0.01
    assert abs(float(b.get("y")) + float(b.get("height")) - float(a.get("y"))) < 0.01
    assert abs(float(a.get("height")) - 2 * float(b.get("height"))) < 0.01


def test_html_is_self_contained_with_hover_data_and_producer_links() -> None:
    page = render_html(small_timeline())
    assert "<script src" not in page and "<link" not in page and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    svg = page[page.index("<svg"):page.index("</svg>") + len("</svg>")]
    rects = buffer_rects(ET.fromstring(svg))
    facts = [json.loads(r.get("data-buffer")) for r in rects]
    assert facts[0] == {"name": "a", "bytes": 100, "offset": 0, "first": 0, "last": 2, "shape": "1x25",
                        "dtype": "f32", "producer": 0, "consumers": [1, 2]}
    assert facts[2]["name"] == 'x<&"y' and facts[2]["shape"] == "scalar"
    # The op list: one item per op, each saying which buffers it produces.
    items = re.findall(r'<li id="op(\d+)" data-name="([^"]*)" data-produces="([^"]*)"', page)
    assert [(i, n) for i, n, _ in items] == [("0", "dnn.conv"), ("1", "dnn.unary(relu)"), ("2", "dnn.binary(add)")]
    assert json.loads(items[2][2].replace("&quot;", '"')) == [2]


def test_lazy_and_eager_say_how_addresses_were_drawn() -> None:
    lazy = ET.fromstring(render_svg(small_timeline("first-fit")))
    eager = ET.fromstring(render_svg(small_timeline("stacked")))
    assert "first-fit allocator" in "".join(lazy.itertext())
    assert "owns its bytes for the whole run" in "".join(eager.itertext())


def test_units_follow_the_size() -> None:
    from pyocc.units import unit_for

    assert unit_for(160) == ("B", 1) and unit_for(4096) == ("KiB", 1024) and unit_for(9633792) == ("MiB", 2**20)


def test_nice_steps() -> None:
    assert nice_step(9.19, 8) == 2
    assert nice_step(175, 10) == 20
    assert nice_step(0, 5) == 1


def test_explain_lists_the_peak_buffers_largest_first_with_their_keepers() -> None:
    text = explain_peak(small_timeline())
    lines = text.splitlines()
    assert "peak is at op #2 dnn.binary(add), with 160 bytes (160 B) live in 3 buffers" in lines[0]
    rows = lines[4:]
    assert [r.split()[2] for r in rows] == ["a", "b", 'x<&"y']
    assert rows[0].rstrip().endswith("#2 dnn.binary(add)")  # a is kept alive by its last reader, op 2
    assert "(nobody: written by the peak op)" in rows[2]


def pyocc(*args: str) -> subprocess.CompletedProcess:
    """`pyocc ARGS` run in this process (tests/tools/inprocess.py), as a subprocess's result."""
    return run_tool("pyocc", *args)


def test_plan_svg_html_and_explain_on_a_model(tmp_path: Path) -> None:
    model = str(light_model_path("squeezenet"))
    report = json.loads(pyocc("plan", model, "--format", "json").stdout)
    out = tmp_path / "plan.svg"
    result = pyocc("plan", model, "--format", "svg", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert len(buffer_rects(ET.parse(out).getroot())) == len(report["buffers"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.svg"]  # no temporary left behind
    html = pyocc("plan", model, "--format", "html", "--memory", "lazy")
    assert html.returncode == 0 and html.stdout.count('class="buffer"') == len(report["buffers"])
    explain = pyocc("plan", model, "--explain")
    assert explain.returncode == 0, explain.stderr
    first = explain.stdout.splitlines()[0]
    assert f"with {report['lower_bound_bytes']:,d} bytes" in first


def test_plan_output_into_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    result = pyocc("plan", str(light_model_path("squeezenet")), "--format", "svg",
                   "-o", str(tmp_path / "missing" / "plan.svg"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"pyocc: error: {tmp_path / 'missing' / 'plan.svg'}: the folder '{tmp_path / 'missing'}' does not exist; "
        "create it first or write elsewhere"]


def test_a_failed_plan_leaves_the_output_file_alone(tmp_path: Path) -> None:
    out = tmp_path / "plan.html"
    out.write_text("the previous picture")
    result = pyocc("plan", str(light_model_path("squeezenet")), "--format", "html", "--planner", "magic",
                   "-o", str(out))
    assert result.returncode == 1 and "unknown planner 'magic'" in result.stderr
    assert out.read_text() == "the previous picture"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.html"]


def test_named_pools_are_stacked_and_never_overlap(tmp_path: Path) -> None:
    from pyocc.api import lower
    from pyocc.report.timeline import build_timeline

    module, report = lower(light_model_path("squeezenet"), memory_pools="sram:size=1MiB,dram")
    timeline = build_timeline(module, report)
    assert [name for name, _, _ in timeline.pools] == ["sram", "dram"]
    (_, _, sram_size), (_, dram_base, _) = timeline.pools
    assert dram_base == sram_size
    boxes = timeline.buffers
    for i, a in enumerate(boxes):  # stacked, live buffers of both pools still never share a byte
        for b in boxes[i + 1:]:
            if a.first <= b.last and b.first <= a.last:
                assert a.offset + a.bytes <= b.offset or b.offset + b.bytes <= a.offset, (a.name, b.name)
    svg = ET.fromstring(render_svg(timeline))
    assert "pools stacked bottom to top: sram" in "".join(svg.itertext())
    assert len(buffer_rects(svg)) == len(report.buffers)


def stage_timeline() -> Timeline:
    """Four buffers written by fused convs: two 8x8 maps, one 4x4 map and a
    vector; a 1-byte buffer too thin to see; `a` shared by two writers
    (coalesced); one graph input and one output."""
    ops = [OpBox(i, "dnn.conv+relu", [i], [i - 1] if i else []) for i in range(4)]
    buffers = [
        BufferBox(0, "a", 4096, 0, 0, 1, [1, 16, 8, 8], "f32", 0, [1], writers=[0, 1]),
        BufferBox(1, "b", 4096, 4096, 1, 2, [1, 16, 8, 8], "f32", 1, [2]),
        BufferBox(2, "c", 1024, 0, 2, 3, [1, 16, 4, 4], "f32", 2, [3]),
        BufferBox(3, "d", 1, 1024, 3, 3, [1, 1, 1, 1], "f32", 3, []),
    ]
    return Timeline("m.onnx", "pool", "auto", ops, buffers, pool_bytes=8192, lower_bound_bytes=8192,
                    naive_bytes=9217, placement="planned", io=[("x", "input", 768), ("y", "output", 40)])


def test_colour_follows_the_stage_even_when_every_op_is_a_fused_conv() -> None:
    root = ET.fromstring(render_svg(stage_timeline()))
    fills = {r.get("id"): r.get("fill") for r in buffer_rects(root)}
    assert fills["b0"] == fills["b1"] != fills["b2"]


def test_legend_lists_only_stages_with_a_visible_box() -> None:
    root = ET.fromstring(render_svg(stage_timeline()))
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    assert "8x8" in texts and "4x4" in texts
    assert "1x1" not in texts  # buffer d is one byte of an 8 KiB pool: no visible box, no legend entry


def test_inputs_outputs_and_coalescing_are_shown() -> None:
    root = ET.fromstring(render_svg(stage_timeline()))
    texts = " ".join("".join(t.itertext()) for t in root.iter(f"{SVG}text"))
    assert "graph input: x (768 B)" in texts and "graph output: y (40 B)" in texts
    tip = "".join(buffer_rects(root)[0].find(f"{SVG}title").itertext())
    assert "coalesced: 2 tensors share it, written by #0 dnn.conv+relu, #1 dnn.conv+relu" in tip


def test_the_explanation_of_a_box_appears_once_in_the_page() -> None:
    assert render_html(stage_timeline()).count("each box is one buffer") + \
        render_html(stage_timeline()).count("Each box is one buffer") == 1
