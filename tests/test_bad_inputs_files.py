"""Bad spec files, report placeholders, validation tables and calibration data (issue 20,
"Trust on any machine"): each ends with exit 2 and one line naming the file, key or
argument and what was expected, nothing written; or, where the input is fine after all (a
byte-order mark, repeated rows, ``--version``), exit 0 with the right output.

The cases write their files beside the working folder (``aside``) and run the command from
it (`place`), so a refused command that wrote anything fails `_check`.
"""

from __future__ import annotations

import json
import math
from importlib import metadata
from pathlib import Path

import pytest
import test_bad_inputs
from test_bad_inputs import BASE, REFUSE, _check, _outcome

from stepwall.apps.report.placeholders import MAX_PRECISION, MAX_WIDTH
from stepwall.spec.loader import MAX_FROM_DEPTH

place = test_bad_inputs.place  # the corpus's fixture: an empty working folder and files aside

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "tests" / "data" / "calibration" / "demo-gpu.toml"
BOM = b"\xef\xbb\xbf"


def _aside(place: dict[str, str]) -> Path:
    return Path(place["work"]).parent / "aside"


def _run(argv: list[str], place: dict[str, str], capsys: pytest.CaptureFixture[str],
         expect: int | None, fragment: str) -> tuple[int, str, str]:  # fmt: skip
    work = Path(place["work"])
    before = {p.name for p in work.iterdir()}
    code, out, err = _outcome(argv, capsys)
    _check(code, out, err, expect, fragment, before, work)
    return code, out, err


# ---------------------------------------------------------------- report placeholders


def _report(text: str) -> str:
    return (f'title = "t"\n[scenarios]\na = "{BASE}"\n[[block]]\nkind = "prose"\n'
            f"text = {json.dumps(text)}\n")  # fmt: skip


PLACEHOLDER_CASES: list[tuple[str, str, str]] = [
    ("tower-of-powers", "{10**10**10}", "exceeds the range of a number"),
    ("huge-power", "{(10**1000)**1000}", "±1.8e308"),
    ("huge-width", "{a.step_time_s:>2000000000}", f"width at most {MAX_WIDTH}"),
    ("huge-precision", "{a.step_time_s:.2000000000f}", f"precision at most {MAX_PRECISION}"),
    ("unknown-format", "{a.step_time_s:.2q}", "format '.2q' cannot show a number"),
    ("text-format", "{a.name:.2f}", "format '.2f' cannot show text"),
    ("unclosed", "step {a.step_time_s", "placeholder '{a.step_time_s' is not closed"),
    ("stray-close", "a } b", "'}' closes no placeholder"),
    ("empty", "a {} b", "placeholder {} is empty"),
    ("repeated-text", '{"ab" * ceil(1e9)}', "cannot be computed"),
    ("complex", "{(-8)**(1/3)}", "not a real number"),
    ("domain", "{log(0)}", "math domain error"),
    ("too-long", "{" + "+".join(["1"] * 600) + "}", "longer than 1000 characters"),
]


@pytest.mark.parametrize(("name", "text", "fragment"), PLACEHOLDER_CASES,
                         ids=[c[0] for c in PLACEHOLDER_CASES])  # fmt: skip
def test_bad_placeholder(name, text, fragment, place, capsys) -> None:
    spec = _aside(place) / "r.toml"
    spec.write_text(_report(text))
    _, _, err = _run(["report", str(spec), "-o", "out"], place, capsys, REFUSE, fragment)
    assert "r.toml:block[0].text:" in err, err


def test_a_table_format_is_checked_before_any_work(place, capsys) -> None:
    spec = _aside(place) / "r.toml"
    spec.write_text(
        f'title = "t"\n[scenarios]\na = "{BASE}"\n[[block]]\nkind = "table"\nid = "t1"\n'
        'rows = { key = "parallel.tp", values = [8] }\ncolumns = { scenarios = ["a"] }\n'
        'metric = "tokens_per_s_per_user"\nformat = ">900000000.2f"\n'
    )
    _run(["report", str(spec), "-o", "out"], place, capsys, REFUSE,
         "r.toml:block[0].format: format '>900000000.2f' asks for width 900000000")  # fmt: skip


def test_good_placeholders_still_fill(place, capsys) -> None:
    spec = _aside(place) / "r.toml"
    spec.write_text(_report("{a.step_time_s as ms:.2f} ms, {{literal}}, {2**10:.0f}, {a.name:>4s}"))
    _run(["report", str(spec), "-o", "out"], place, capsys, 0, "")
    text = (Path(place["work"]) / "out" / "REPORT.md").read_text()
    line = next(x for x in text.splitlines() if x.endswith(f"{{literal}}, 1024, {BASE}"))
    assert math.isfinite(float(line.split(" ms")[0]))


# ---------------------------------------------------------------- from chains


def _chain(folder: Path, n: int) -> Path:
    """``s0.toml`` -> ``s1.toml`` -> … -> ``s{n-1}.toml`` -> the base scenario."""
    for i in range(n):
        parent = f"./s{i + 1}.toml" if i < n - 1 else BASE
        extra = f"[workload]\nconcurrency = {i + 1}\n" if i in (0, 1) else ""
        (folder / f"s{i}.toml").write_text(f'from = "{parent}"\n{extra}')
    return folder / "s0.toml"


def test_a_3000_deep_from_chain_is_refused_without_recursion(place, capsys) -> None:
    top = _chain(_aside(place), 3000)
    _, _, err = _run(["eval", str(top)], place, capsys, REFUSE,
                     f"from: the from chain is longer than {MAX_FROM_DEPTH} files")  # fmt: skip
    assert f"s{MAX_FROM_DEPTH - 1}.toml:from" in err


def test_a_chain_within_the_limit_merges_nearest_last(place, capsys) -> None:
    """63 files and the base scenario: s0's concurrency (1) wins over s1's (2), and the
    value is blamed on s0."""
    top = _chain(_aside(place), MAX_FROM_DEPTH - 1)
    _, out, _ = _run(["eval", str(top), "--json"], place, capsys, 0, "")
    param = next(p for p in json.loads(out)["parameters"] if p["path"] == "workload.concurrency")
    assert param["value"] == 1 and param["file"].endswith("s0.toml"), param


# ---------------------------------------------------------------- check decides by the chain


def test_check_follows_a_model_override_from_a_path(place, capsys) -> None:
    aside = _aside(place)
    base = (ROOT / "specs" / "models" / "kimi-k2.6-int4.toml").read_text()
    (aside / "qwen3.toml").write_text(base)
    (aside / "mine.toml").write_text('from = "./qwen3.toml"\nname = "mine"\nn_layers = 60\n')
    _, out, _ = _run(["check", str(aside / "mine.toml")], place, capsys, 0, "")
    assert "is a valid model entry" in out
    (aside / "sc.toml").write_text(f'from = "{BASE}"\nmodel = "./mine.toml"\n')
    _run(["eval", str(aside / "sc.toml")], place, capsys, 0, "")  # the same file eval reads


def test_check_of_an_override_from_a_missing_path_names_it(place, capsys) -> None:
    (_aside(place) / "mine.toml").write_text('from = "./nope.toml"\nn_layers = 60\n')
    _run(["check", str(_aside(place) / "mine.toml")], place, capsys, REFUSE,
         "mine.toml:from: ./nope.toml: not found")  # fmt: skip


# ---------------------------------------------------------------- names, byte-order marks


def test_a_hardware_name_must_be_text(place, capsys) -> None:
    aside = _aside(place)
    hw = (ROOT / "specs" / "hardware" / "b300.toml").read_text()
    assert hw.startswith('name = "')
    (aside / "hw.toml").write_text("name = 5\n" + hw.split("\n", 1)[1])
    (aside / "sc.toml").write_text(f'from = "{BASE}"\nhardware = "./hw.toml"\n')
    fragment = "hw.toml:name: 5 is not text"
    _run(["check", str(aside / "hw.toml")], place, capsys, REFUSE, fragment)
    _run(["eval", str(aside / "sc.toml")], place, capsys, REFUSE, fragment)


@pytest.mark.parametrize(("body", "fragment"), [
    (f'from = "{BASE}"\nname = 5\n', "sc.toml:name: 5 is not text"),
    (f'from = "{BASE}"\ndescription = ["x"]\n', "sc.toml:description: ['x'] is not text"),
    (f'from = "{BASE}"\n[hardware]\nfrom = "b300"\nname = true\n', "sc.toml:hardware.name:"),
])  # fmt: skip
def test_a_scenario_name_must_be_text(body, fragment, place, capsys) -> None:
    (_aside(place) / "sc.toml").write_text(body)
    _run(["eval", str(_aside(place) / "sc.toml")], place, capsys, REFUSE, fragment)


def test_a_byte_order_mark_is_accepted(place, capsys) -> None:
    """tomllib refuses a UTF-8 byte-order mark; stepwall reads past it, as its CSV reader
    does: the same file without the mark means the same spec."""
    sc = _aside(place) / "bom.toml"
    sc.write_bytes(BOM + f'from = "{BASE}"\n'.encode())
    _, out, _ = _run(["check", str(sc)], place, capsys, 0, "")
    assert "is a valid scenario" in out


# ---------------------------------------------------------------- validation tables

ROW = (
    '[[row]]\nid = "r1"\nclass = "{cls}"\nscenario = "{BASE}"\n'
    'metric = "tokens_per_s_per_user"\nmeasured = "300 tokens/s"\nsource = "x"\n'
    'url = "https://example.org"\n'
)


def _row(cls: str = "tp_batch1") -> str:
    return ROW.replace("{cls}", cls).replace("{BASE}", BASE)


TABLE_CASES: list[tuple[str, str, str]] = [
    ("unknown-class", _row("warp_speed"), "v.toml:row[0].class: 'warp_speed' is not allowed"),
    ("missing-class", _row().replace('class = "tp_batch1"\n', ""), "row[0].class: missing"),
    ("class-typo", _row().replace("class =", "clas ="), "did you mean 'class'?"),
    ("row-number", "row = 5\n", "v.toml:row: 5 is not a list of tables"),
    ("row-text", 'row = "x"\n', "v.toml:row: 'x' is not a list of tables"),
    ("no-rows", 'description = "nothing yet"\n', "v.toml:row: no rows"),
    ("empty-rows", "row = []\n", "v.toml:row: no rows"),
]


@pytest.mark.parametrize(("name", "body", "fragment"), TABLE_CASES,
                         ids=[c[0] for c in TABLE_CASES])  # fmt: skip
def test_bad_validation_table(name, body, fragment, place, capsys) -> None:
    (_aside(place) / "v.toml").write_text(body)
    _, _, err = _run(["validate", str(_aside(place) / "v.toml")], place, capsys, REFUSE,
                     fragment)  # fmt: skip
    assert "--class" not in err


def test_validate_a_folder_says_so(place, capsys) -> None:
    _run(["validate", place["folder"]], place, capsys, REFUSE, "foreign: is a folder")
    _run(["validate", str(_aside(place) / "nope.toml")], place, capsys, REFUSE,
         "nope.toml: not found")  # fmt: skip


def test_an_empty_selection_names_the_flags_that_made_it(place, capsys) -> None:
    row = "trtllm-b200-dsr1-fp4-minlat-nomtp"  # a tp_batch1 row of the shipped table
    _run(["validate", "--class", "wide_ep", "--row", row], place, capsys, REFUSE,
         f"--class:wide_ep: selects no rows among --row {row}")  # fmt: skip


def test_validate_a_table_with_a_byte_order_mark(place, capsys) -> None:
    (_aside(place) / "v.toml").write_bytes(BOM + _row().encode())
    _, out, _ = _run(["validate", str(_aside(place) / "v.toml")], place, capsys, 0, "")
    assert "r1" in out


# ---------------------------------------------------------------- calibration data

HEAD = "primitive,bytes [GB],time [us],source\n"


def _calibrate(place: dict[str, str], capsys: pytest.CaptureFixture[str], csv: str,
               *args: str, expect: int | None, fragment: str = "") -> tuple[str, str]:  # fmt: skip
    data = _aside(place) / "d.csv"
    data.write_text(csv)
    _, out, err = _run(["calibrate", str(GPU), "--data", str(data), *args], place, capsys,
                       expect, fragment)  # fmt: skip
    return out, err


def test_identical_rows_count_once_and_give_no_zero_width_interval(place, capsys) -> None:
    """50 copies of one measurement are one point: one field fitted to it has no interval."""
    csv = HEAD + "memory_copy,1,2000,x\n" * 50
    out, err = _calibrate(place, capsys, csv, "--fit", "kernel_floor", expect=0)
    assert err.count("\n") == 1 and "49 rows repeat another row exactly" in err, err
    assert "1 distinct point" in err
    line = next(x for x in out.splitlines() if x.startswith("kernel_floor "))
    assert "undetermined" in line and ".." not in line, line
    out, _ = _calibrate(place, capsys, csv, "--fit", "kernel_floor", "--json", expect=0)
    doc = json.loads(out)
    assert doc["points"] == 1 and doc["fields"][0]["ci95"] == [None, None]


def test_identical_rows_are_too_few_for_two_fields(place, capsys) -> None:
    _, err = _calibrate(place, capsys, HEAD + "memory_copy,1,2000,x\n" * 50, expect=REFUSE,
                        fragment="too few points: 1 for 2 fields")  # fmt: skip
    assert err.startswith("stepwall: warning: 49 rows repeat"), err


def test_as_many_distinct_points_as_fields_is_undetermined(place, capsys) -> None:
    csv = HEAD + ("memory_copy,1,2000,x\nmemory_copy,2,2300,y\n" * 25)
    out, err = _calibrate(place, capsys, csv, expect=0)
    assert "48 rows repeat" in err and "2 distinct points" in err
    for key in ("hbm_efficiency", "kernel_floor"):
        line = next(x for x in out.splitlines() if x.startswith(key + " "))
        assert "undetermined" in line, line


def test_distinct_points_give_an_interval(place, capsys) -> None:
    csv = HEAD + "".join(f"memory_copy,{b},{2000 + b * 300 + b * b},x\n" for b in (1, 2, 3, 5))
    out, err = _calibrate(place, capsys, csv, "--fit", "kernel_floor", expect=0)
    assert "repeat" not in err
    line = next(x for x in out.splitlines() if x.startswith("kernel_floor "))
    assert "undetermined" not in line and " .. " in line, line


def test_a_spec_with_a_byte_order_mark_is_calibrated_and_written_without_it(place, capsys):
    spec = _aside(place) / "gpu.toml"
    spec.write_bytes(BOM + GPU.read_bytes())
    data = _aside(place) / "d.csv"
    data.write_text(HEAD + "".join(f"memory_copy,{b},{2000 + b * 300},x\n" for b in (1, 2, 3)))
    _run(["calibrate", str(spec), "--data", str(data), "-o", "out.toml"], place, capsys, 0, "")
    written = (Path(place["work"]) / "out.toml").read_bytes()
    assert not written.startswith(BOM) and b'name = "demo-gpu"' in written
    _, out, _ = _run(["check", "out.toml"], place, capsys, 0, "")
    assert "valid hardware entry" in out


def test_a_row_with_more_fields_than_the_header_is_refused(place, capsys) -> None:
    csv = HEAD + "memory_copy,1,300,x\nmemory_copy,2,500,x\nmemory_copy,4,900,x,extra\n"
    _calibrate(place, capsys, csv, expect=REFUSE,
               fragment="d.csv:line 4: 5 fields but the header has 4")  # fmt: skip


@pytest.mark.parametrize("given", ["", ",", " , "])
def test_an_empty_fit_is_refused(given, place, capsys) -> None:
    csv = HEAD + "memory_copy,1,300,x\nmemory_copy,2,500,x\n"
    _calibrate(place, capsys, csv, "--fit", given, expect=REFUSE, fragment="--fit: names no field")


# ---------------------------------------------------------------- --version


def test_version_loads_no_plugin(place, capsys, monkeypatch) -> None:
    """``--version`` is stepwall's version: it builds no registry (a slow third-party
    plugin's import is not paid, so no warning is owed)."""
    from stepwall.plugin import registry

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("--version loaded the plugins")

    monkeypatch.setattr(registry, "default", refuse)
    monkeypatch.setattr(registry, "build", refuse)
    _, out, err = _run(["--version"], place, capsys, 0, "")
    assert out == f"stepwall {metadata.version('stepwall')}\n" and err == ""
