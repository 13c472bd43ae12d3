"""Bad inputs nobody had listed, to search, calibrate, validate, report, the environment and
--help (issue 20, "Trust on any machine"): each command line ends with its exit code and, when
refused, one line on stderr that contains the fragment (the file, key or argument at fault
and what was expected), nothing on stdout and nothing written.

The files a case reads are written beside the working folder (``aside``) by `files`, and the
cases name them as ``{aside}/NAME``.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from test_bad_inputs import BASE, REFUSE, _check, _outcome, place  # noqa: F401 (a fixture)

from stepwall.apps import calibrate
from stepwall.cli import COMMANDS
from stepwall.numeric import compiled
from stepwall.plugin import registry as registries

ROOT = Path(__file__).resolve().parents[1]
GPU = str(ROOT / "tests" / "data" / "calibration" / "demo-gpu.toml")
HEAD = "primitive,bytes [GB],time [us],source\n"
COPY = HEAD + "memory_copy,1,2000,x\nmemory_copy,2,2300,x\nmemory_copy,3,2700,x\n"

SEARCH = ["search", "deepseek-v3-fp8", "--hardware", "h200", "--cluster", "hgx-h200-ib"]
SMALL = [*SEARCH, "--gpus", "8", "--batch", "1,8"]


def _row(extra: str = "", *, id_: str = "r1", measured: str = '"100 tokens/s"',
         metric: str = "tokens_per_s_per_gpu") -> str:  # fmt: skip
    return (f'[[row]]\nid = "{id_}"\nclass = "tp_batch1"\nscenario = "gptoss-h100-tp8"\n'
            f'metric = "{metric}"\nmeasured = {measured}\nsource = "x"\n'
            f'url = "https://example.org"\n{extra}\n')  # fmt: skip


def _distinct(n: int, size: float, time: float) -> str:
    """``n`` memory-copy rows, no two alike."""
    return HEAD + "".join(f"memory_copy,{size + i / 1e5},{time + i / 100},x\n" for i in range(n))


REPORT_HEAD = f'title = "t"\n[scenarios]\na = "{BASE}"\n'
TABLE = '[[block]]\nkind = "table"\nid = "t"\nmetric = "tokens_per_s_per_user"\n'
TP_ROWS = 'rows = { key = "parallel.tp", values = [8] }\ncolumns = { scenarios = ["a"] }\n'
DERIVE = '[[block]]\nkind = "derivation"\nid = "d"\nscenario = "a"\n'
PARETO = ('[[block]]\nkind = "pareto"\nid = "q"\nmodel = "deepseek-v3-fp8"\n'
          'hardware = ["h200"]\nclusters = ["hgx-h200-ib"]\n')  # fmt: skip

FILES: dict[str, str] = {
    # calibration data
    "copy.csv": COPY,
    "copy2.csv": COPY.replace("2000", "2100"),
    "crlf.csv": COPY.replace("\n", "\r\n"),
    "quoted.csv": HEAD + '"memory_copy","1","2000","a, b"\nmemory_copy,2,2300,x\n'
    "memory_copy,3,2700,x\n",
    "rows-100001.csv": HEAD + "memory_copy,1,2000,x\n" * (calibrate.MAX_ROWS + 1),
    "rows-60000.csv": _distinct(60_000, 1.0, 2000.0),
    "rows-60000b.csv": _distinct(60_000, 2.0, 3000.0),
    "gemm-frac.csv": "primitive,m,n,k,weight_bits [bit],precision,time [us],source\n"
    "gemm,1,7168,7168,16,bf16,19.4,x\ngemm,2.5,7168,7168,16,bf16,19.6,x\n",
    # calibration manifests (beside copy.csv)
    "m-dup.toml": 'spec = "h200"\ndata = ["copy.csv", "copy.csv"]\n',
    "m-desc.toml": 'spec = "h200"\ndata = ["copy.csv"]\ndescription = 5\n',
    "m-spec.toml": 'spec = "h999"\ndata = ["copy.csv"]\n',
    # validation tables
    "v-setstr.toml": _row('set = "parallel.tp=8"'),
    "v-idempty.toml": _row(id_=""),
    "v-nan.toml": _row(measured='"nan tokens/s"'),
    "v-huge.toml": _row(measured='"1e400 tokens/s"'),
    "v-date.toml": _row('date = "yesterday"'),
    "v-settwice.toml": _row('set = ["parallel.tp=8", "parallel.tp=4"]'),
    "v-setbad.toml": _row('set = ["nope.key=1"]'),
    "v-gpus.toml": _row(metric="gpus", measured='"8"'),
    "v-rowint.toml": "row = [1]\n",
    "v-1001.toml": "".join(_row(id_=f"r{i}") for i in range(1001)),
    # reports
    "r-id-alias.toml": REPORT_HEAD + TABLE.replace('id = "t"', 'id = "a"') + TP_ROWS,
    "r-id-twice.toml": REPORT_HEAD
    + TABLE
    + TP_ROWS
    + DERIVE.replace('"d"', '"t"')
    + 'derive = "wall"\nkey = "parallel.tp"\n',
    "r-id-path.toml": REPORT_HEAD + TABLE.replace('"t"', '"../../x"') + TP_ROWS,
    "r-values-empty.toml": REPORT_HEAD + TABLE + TP_ROWS.replace("[8]", "[]"),
    "r-values-huge.toml": REPORT_HEAD
    + TABLE
    + TP_ROWS.replace("[8]", "[" + ",".join(["8"] * 1001) + "]"),
    "r-values-twice.toml": REPORT_HEAD + TABLE + TP_ROWS.replace("[8]", "[8, 8]"),
    "r-scenarios-text.toml": REPORT_HEAD
    + TABLE
    + 'rows = { scenarios = "a" }\ncolumns = { metrics = ["step_time_s"] }\n',
    "r-units-short.toml": REPORT_HEAD
    + TABLE
    + 'rows = { metrics = ["step_time_s", "tokens_per_s"], units = ["ms"] }\n'
    'columns = { scenarios = ["a"] }\n',
    "r-label-number.toml": REPORT_HEAD
    + TABLE
    + TP_ROWS.replace("values = [8] }", "values = [8], label = 5 }"),
    "r-derive-eps.toml": REPORT_HEAD + DERIVE + 'derive = "wall"\nkey = "parallel.tp"\neps = -1\n',
    "r-derive-key.toml": REPORT_HEAD + DERIVE + 'derive = "wall"\nkey = "parallel.tpp"\n',
    "r-pareto-decoding.toml": REPORT_HEAD + PARETO + "gpus = [8]\nbatch = [1]\ndecoding = []\n",
    "r-pareto-spread.toml": REPORT_HEAD + PARETO + "gpus = [8]\nbatch = [1]\nspread = 5.0\n",
    "r-pareto-batch.toml": REPORT_HEAD + PARETO + "gpus = [8]\nbatch = []\n",
    "r-pareto-target.toml": REPORT_HEAD
    + PARETO
    + 'gpus = [8]\nbatch = [1]\ntargets = ["speed>=5"]\n',
    "r-pareto-twice.toml": REPORT_HEAD + PARETO + "gpus = [8]\nbatch = [1]\n"
    'targets = ["tokens_per_s_per_user>=50", "tokens_per_s_per_user>=50"]\n',
    "r-pareto-gpus.toml": REPORT_HEAD + PARETO + "gpus = [0]\nbatch = [1]\n",
    "r-pareto-isl.toml": REPORT_HEAD + PARETO + "gpus = [8]\nbatch = [1]\nisl = 0\n",
    "r-name-up.toml": REPORT_HEAD.replace('title = "t"\n', 'title = "t"\nname = "../../up"\n'),
    "r-name-abs.toml": REPORT_HEAD.replace('title = "t"\n', 'title = "t"\nname = "/tmp/x"\n'),
    "r-name-empty.toml": REPORT_HEAD.replace('title = "t"\n', 'title = "t"\nname = ""\n'),
    "r-block-ints.toml": REPORT_HEAD.replace("[scenarios]", "block = [1, 2]\n[scenarios]"),
    "r-logx-zero.toml": REPORT_HEAD + '[[block]]\nkind = "plot"\nid = "p"\n'
    'plot = "metric_vs_key"\nscenarios = ["a"]\nkey = "engine.per_step"\n'
    'values = ["0ms", "1ms"]\nmetric = "tokens_per_s_per_user"\nlogx = true\n',
    "r-alias-missing.toml": 'title = "t"\n[scenarios.a]\nscenario = "nope"\n',
}

A = "{aside}/"
CASES: list[tuple[str, list[str], int, str]] = [
    # search: every option with odd values, each blamed on itself
    ("search-isl-0", [*SMALL, "--isl", "0"], REFUSE, "search:--isl: 0 tokens per request"),
    ("search-osl-negative", [*SMALL, "--osl", "-1"], REFUSE, "search:--osl: -1 tokens"),
    ("search-decoding-empty", [*SMALL, "--decoding", ""], REFUSE,
     "--decoding: names no decoding kind"),
    ("search-decoding-commas", [*SMALL, "--decoding", ",,"], REFUSE, "names no decoding kind"),
    ("search-decoding-twice", [*SMALL, "--decoding", "autoregressive,autoregressive"], REFUSE,
     "--decoding:autoregressive: is given twice"),
    ("search-set-decoding-kind", [*SMALL, "--set", "decoding.kind=mtp"], REFUSE,
     "--set:decoding.kind: is searched"),
    ("search-set-setting-of-no-kind", [*SMALL, "--set", "decoding.budget=4"], REFUSE,
     "--set:decoding.budget: is a setting of no searched decoding kind"),
    ("search-vary-setting-of-no-kind", [*SMALL, "--vary", "decoding.budget=1,2"], REFUSE,
     "--vary:decoding.budget: is a setting of no searched decoding kind"),
    ("search-engine-empty", [*SMALL, "--engine", ""], REFUSE, "--engine: '' names no engine"),
    ("search-engine-unknown", [*SMALL, "--engine", "unknown"], REFUSE,
     "--engine:unknown: no engines entry named 'unknown'"),
    ("search-hardware-unknown", ["search", "deepseek-v3-fp8", "--hardware", "h999", "--cluster",
     "hgx-h200-ib"], REFUSE, "--hardware:h999: no hardware entry"),
    ("search-cluster-unknown", ["search", "deepseek-v3-fp8", "--hardware", "h200", "--cluster",
     "hgx-nope"], REFUSE, "--cluster:hgx-nope: no clusters entry"),
    ("search-model-unknown", ["search", "nope", "--hardware", "h200", "--cluster",
     "hgx-h200-ib"], REFUSE, "MODEL:nope: no models entry"),
    ("search-hardware-twice", ["search", "deepseek-v3-fp8", "--hardware", "h200,h200",
     "--cluster", "hgx-h200-ib"], REFUSE, "--hardware:h200: is given twice on hgx-h200-ib"),
    ("search-cluster-count", ["search", "deepseek-v3-fp8", "--hardware", "h200,b200,h100",
     "--cluster", "hgx-h200-ib,hgx-b200-ib"], REFUSE, "--cluster: 2 clusters for 3 hardware"),
    ("search-same-hardware-two-clusters", ["search", "deepseek-v3-fp8", "--hardware",
     "h200,h200", "--cluster", "hgx-h200-ib,hgx-h100-ib", "--gpus", "8", "--batch", "1"], 0, ""),
    ("search-spread-nan", [*SMALL, "--spread", "nan"], REFUSE, "--spread: nan is not a fraction"),
    ("search-chunk-0", [*SMALL, "--chunk", "0"], REFUSE, "--chunk: must be at least 1"),
    ("search-at-unknown-metric", [*SMALL, "--at", "speed>=5"], REFUSE,
     "--at:speed: unknown metric"),
    ("search-objective-unknown", [*SMALL, "--objective", "unknown"], REFUSE,
     "--objective:unknown: unknown metric"),
    ("search-at-twice", [*SMALL, "--at", "tokens_per_s_per_user>=50", "--at",
     "tokens_per_s_per_user >= 50"], REFUSE, "--at:tokens_per_s_per_user>=50: is given twice"),
    ("search-plot-is-the-output", [*SMALL, "-o", "x.svg", "--plot", "x.svg"], REFUSE,
     "--plot:x.svg: is the -o file too"),
    ("search-format-against-output", [*SMALL, "-o", "x.json", "--format", "csv"], REFUSE,
     "--format: csv does not go with -o x.json"),
    ("search-json-with-json-output", [*SMALL, "--json", "-o", "x.json"], 0, ""),
    # calibrate: data files of odd shapes and sizes, bounded before the fit
    ("calibrate-crlf", ["calibrate", GPU, "--data", A + "crlf.csv"], 0, ""),
    ("calibrate-quoted", ["calibrate", GPU, "--data", A + "quoted.csv"], 0, ""),
    ("calibrate-rows-over-limit", ["calibrate", GPU, "--data", A + "rows-100001.csv"], REFUSE,
     "rows-100001.csv:line 100002: more than 100,000 rows"),
    ("calibrate-rows-over-limit-in-all", ["calibrate", GPU, "--data", A + "rows-60000.csv",
     "--data", A + "rows-60000b.csv"], REFUSE,
     "rows-60000b.csv: brings the data to more than 100,000 rows"),
    ("calibrate-endless-device", ["calibrate", GPU, "--data", "/dev/zero"], REFUSE,
     "/dev/zero: is larger than 64 MiB"),
    ("calibrate-fractional-count", ["calibrate", GPU, "--data", A + "gemm-frac.csv"], REFUSE,
     "gemm-frac.csv:line 3, m: 2.5 is not a whole number"),
    ("calibrate-data-twice", ["calibrate", GPU, "--data", A + "copy.csv", "--data",
     A + "copy.csv"], REFUSE, "copy.csv: the same file as --data"),
    ("calibrate-data-empty", ["calibrate", GPU, "--data", ""], REFUSE,
     "--data: '' is not a file"),
    ("calibrate-check-data-twice", ["calibrate", "--check", A + "m-dup.toml"], REFUSE,
     "m-dup.toml:data: 'copy.csv' is listed twice"),
    ("calibrate-check-description", ["calibrate", "--check", A + "m-desc.toml"], REFUSE,
     "m-desc.toml:description: 5 is not text"),
    ("calibrate-check-unknown-spec", ["calibrate", "--check", A + "m-spec.toml"], REFUSE,
     "m-spec.toml:spec: no hardware or cluster entry named 'h999'"),
    ("calibrate-check-manifest-twice", ["calibrate", "--check", A + "m-dup.toml",
     A + "m-dup.toml"], REFUSE, "m-dup.toml: names a manifest given already"),
    # validate: tables with odd rows
    ("validate-set-text", ["validate", A + "v-setstr.toml"], REFUSE,
     "v-setstr.toml:row[0].set: 'parallel.tp=8' is not a list"),
    ("validate-id-empty", ["validate", A + "v-idempty.toml"], REFUSE, "row[0].id: is empty"),
    ("validate-measured-nan", ["validate", A + "v-nan.toml"], REFUSE,
     "row[0].measured: 'nan tokens/s' is not a finite number"),
    ("validate-measured-overflow", ["validate", A + "v-huge.toml"], REFUSE,
     "'1e400 tokens/s' is not a finite number"),
    ("validate-date", ["validate", A + "v-date.toml"], REFUSE,
     "row[0].date: 'yesterday' is not a date"),
    ("validate-set-twice", ["validate", A + "v-settwice.toml"], REFUSE,
     "row[0].set: parallel.tp is set twice"),
    ("validate-set-unknown-key", ["validate", A + "v-setbad.toml"], REFUSE,
     "row[0].set: nope.key: no such key"),
    ("validate-dimensionless-metric", ["validate", A + "v-gpus.toml", "--quiet"], 0, ""),
    ("validate-table-twice", ["validate", A + "v-gpus.toml", A + "../aside/v-gpus.toml"],
     REFUSE, "v-gpus.toml: is given twice"),
    ("validate-too-many-rows", ["validate", A + "v-1001.toml"], REFUSE,
     "v-1001.toml:row[1000]: more than 1,000 rows"),
    ("validate-row-not-a-table", ["validate", A + "v-rowint.toml"], REFUSE,
     "v-rowint.toml:row[0]: 1 is not a table"),
    # report: ids, axes, options and names
    ("report-id-is-an-alias", ["report", A + "r-id-alias.toml", "-o", "out"], REFUSE,
     "block[0].id: 'a' is also a scenario alias"),
    ("report-id-across-kinds", ["report", A + "r-id-twice.toml", "-o", "out"], REFUSE,
     "block[1].id: 't' is also the id of block[0]"),
    ("report-id-a-path", ["report", A + "r-id-path.toml", "-o", "out"], REFUSE,
     "block[0].id: '../../x' is not an identifier"),
    ("report-values-empty", ["report", A + "r-values-empty.toml", "-o", "out"], REFUSE,
     "block[0].rows.values: [] is not a non-empty list"),
    ("report-values-huge", ["report", A + "r-values-huge.toml", "-o", "out"], REFUSE,
     "block[0].rows.values: 1,001 entries"),
    ("report-values-twice", ["report", A + "r-values-twice.toml", "-o", "out"], REFUSE,
     "block[0].rows: the label '8' appears twice"),
    ("report-scenarios-text", ["report", A + "r-scenarios-text.toml", "-o", "out"], REFUSE,
     "block[0].rows.scenarios: 'a' is not a non-empty list"),
    ("report-units-short", ["report", A + "r-units-short.toml", "-o", "out"], REFUSE,
     "block[0].rows.units: 1 entries for 2 metrics"),
    ("report-label-number", ["report", A + "r-label-number.toml", "-o", "out"], REFUSE,
     "block[0].rows.label: 5 is not text"),
    ("report-derive-eps", ["report", A + "r-derive-eps.toml", "-o", "out"], REFUSE,
     "block[0].eps: -1.0 is not a useful tolerance"),
    ("report-derive-key", ["report", A + "r-derive-key.toml", "-o", "out"], REFUSE,
     "block[0].key: parallel.tpp: not a parameter"),
    ("report-pareto-no-decoding", ["report", A + "r-pareto-decoding.toml", "-o", "out"],
     REFUSE, "block[0].decoding: is an empty list"),
    ("report-pareto-spread", ["report", A + "r-pareto-spread.toml", "-o", "out"], REFUSE,
     "block[0].spread: 5.0 is not a fraction"),
    ("report-pareto-batch-empty", ["report", A + "r-pareto-batch.toml", "-o", "out"], REFUSE,
     "block[0].batch: is an empty list"),
    ("report-pareto-target", ["report", A + "r-pareto-target.toml", "-o", "out"], REFUSE,
     "block[0].targets: speed: unknown metric"),
    ("report-pareto-target-twice", ["report", A + "r-pareto-twice.toml", "-o", "out"], REFUSE,
     "block[0].targets: tokens_per_s_per_user>=50: is given twice"),
    ("report-pareto-gpus", ["report", A + "r-pareto-gpus.toml", "-o", "out"], REFUSE,
     "block[0].gpus: must be at least 1 GPU"),
    ("report-pareto-isl", ["report", A + "r-pareto-isl.toml", "-o", "out"], REFUSE,
     "block[0].isl: 0 tokens per request"),
    ("report-name-up", ["report", A + "r-name-up.toml"], REFUSE,
     "r-name-up.toml:name: '../../up' is not a plain name"),
    ("report-name-absolute", ["report", A + "r-name-abs.toml"], REFUSE,
     "name: '/tmp/x' is not a plain name"),
    ("report-name-empty", ["report", A + "r-name-empty.toml"], REFUSE,
     "name: '' is not a plain name"),
    ("report-blocks-not-tables", ["report", A + "r-block-ints.toml", "-o", "out"], REFUSE,
     "r-block-ints.toml:block[0]: 1 is not a table"),
    ("report-logx-zero", ["report", A + "r-logx-zero.toml", "-o", "out"], REFUSE,
     "block[0].logx: the values include 0, not > 0"),
    ("report-alias-missing", ["report", A + "r-alias-missing.toml", "-o", "out"], REFUSE,
     "r-alias-missing.toml:scenarios.a: no scenarios entry named 'nope'"),
]  # fmt: skip


def test_placeholder_braces_pair_as_python_format_does(files, capsys) -> None:
    """``{{{a.name}}}`` is a literal brace, the placeholder, a literal brace (no control
    character of the escaping leaks into an error or the page)."""
    spec = Path(files["aside"]) / "braces.toml"
    spec.write_text(REPORT_HEAD + '[[block]]\nkind = "prose"\ntext = "<{{{a.name}}}> {{x}}"\n')
    _run(["report", str(spec), "-o", "out"], files, capsys, 0, "")
    page = (Path(files["work"]) / "out" / "REPORT.md").read_text()
    assert f"<{{{BASE}}}> {{x}}" in page.splitlines(), page[:300]


@pytest.mark.parametrize("expr", ["1e308*10", "-1e308*10", "1e308+1e308"])
def test_a_placeholder_past_the_range_is_refused(expr, files, capsys) -> None:
    spec = Path(files["aside"]) / "big.toml"
    spec.write_text(REPORT_HEAD + f'[[block]]\nkind = "prose"\ntext = "{{{expr}}}"\n')
    _run(
        ["report", str(spec), "-o", "out"],
        files,
        capsys,
        REFUSE,
        f"big.toml:block[0].text: placeholder {{{expr}}} exceeds the range of a number",
    )


@pytest.fixture
def files(place: dict[str, str]) -> dict[str, str]:  # noqa: F811
    aside = Path(place["work"]).parent / "aside"
    for name, text in FILES.items():
        (aside / name).write_text(text)
    return {**place, "aside": str(aside)}


def _run(argv: list[str], files: dict[str, str], capsys: pytest.CaptureFixture[str],
         expect: int, fragment: str) -> tuple[int, str, str]:  # fmt: skip
    work = Path(files["work"])
    aside = Path(files["aside"])
    before, beside = {p.name for p in work.iterdir()}, {p.name for p in aside.iterdir()}
    code, out, err = _outcome([a.format(**files) for a in argv], capsys)
    _check(code, out, err, expect, fragment, before, work)
    if code == 2:
        assert err.count("\n") == 1, err
        assert {p.name for p in aside.iterdir()} == beside, "a refused command wrote files"
    return code, out, err


@pytest.mark.parametrize(("name", "argv", "expect", "fragment"), CASES,
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_probe(name, argv, expect, fragment, files, capsys) -> None:
    _run(argv, files, capsys, expect, fragment)


def test_a_report_name_never_leaves_out(files, capsys) -> None:
    """``name`` is the folder under out/: one that climbs out is refused, nothing written
    above the working folder."""
    root = Path(files["work"]).parent
    before = {p.name for p in root.iterdir()}
    _run(["report", "{aside}/r-name-up.toml"], files, capsys, REFUSE, "not a plain name")
    assert {p.name for p in root.iterdir()} == before


def test_many_distinct_rows_fit_in_little_memory(files, capsys) -> None:
    """60,000 distinct points: the identifiability check keeps its matrices points × fields,
    never points × points (which would be 29 GB)."""
    tracemalloc.start()
    try:
        _, out, _ = _run(["calibrate", GPU, "--data", "{aside}/rows-60000.csv", "--json"], files,
                         capsys, 0, "")  # fmt: skip
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert json.loads(out)["points"] == 60_000
    assert peak < 1e9, f"{peak / 1e9:.1f} GB"


# ---------------------------------------------------------------- the environment

ENV_CASES: list[tuple[str, str, list[str], int, str]] = [
    ("STEPWALL_NO_CACHE", "garbage", ["eval", BASE], REFUSE,
     "STEPWALL_NO_CACHE: 'garbage' is not a switch"),
    ("STEPWALL_NO_CACHE", "garbage", SMALL, REFUSE, "STEPWALL_NO_CACHE: 'garbage'"),
    ("STEPWALL_NO_CACHE", "0", ["eval", BASE], 0, ""),
    ("STEPWALL_NO_CACHE", "yes", ["eval", BASE], 0, ""),
    ("STEPWALL_CACHE_DIR", "{file}", ["eval", BASE], REFUSE, "STEPWALL_CACHE_DIR: "),
    ("STEPWALL_CACHE_DIR", "/dev/null", SMALL, REFUSE, "/dev/null is not a folder"),
    ("STEPWALL_CACHE_DIR", "{aside}/new folder é", ["eval", BASE], 0, ""),
    ("STEPWALL_DISABLE_PLUGIN_AUTOLOAD", "maybe", ["plugins"], REFUSE,
     "STEPWALL_DISABLE_PLUGIN_AUTOLOAD: 'maybe' is not a switch"),
    ("STEPWALL_DISABLE_PLUGIN_AUTOLOAD", "1", ["plugins"], 0, ""),
    ("STEPWALL_DISABLE_PLUGIN_AUTOLOAD", "maybe", ["--version"], 0, ""),
    ("STEPWALL_NO_FORK", "garbage", ["report", "k26-cluster-scaling", "-o", "out"], REFUSE,
     "STEPWALL_NO_FORK: 'garbage' is not a switch"),
]  # fmt: skip


@pytest.mark.parametrize(("var", "value", "argv", "expect", "fragment"), ENV_CASES,
                         ids=[f"{c[0]}={c[1]}-{c[2][0]}" for c in ENV_CASES])  # fmt: skip
def test_environment(var, value, argv, expect, fragment, files, capsys, monkeypatch) -> None:
    monkeypatch.setenv(var, value.format(**files))
    monkeypatch.setattr(registries, "_DEFAULT", {})  # built afresh, under this environment
    _run(argv, files, capsys, expect, fragment)


@pytest.mark.parametrize(("value", "off"), [("", False), ("0", False), ("off", False),
                                            ("1", True), ("TRUE", True)])  # fmt: skip
def test_no_cache_reads_its_switch(value, off, monkeypatch) -> None:
    """``STEPWALL_NO_CACHE=0`` keeps the cache on; it is not "set, so off"."""
    monkeypatch.setenv("STEPWALL_NO_CACHE", value)
    assert (compiled.cache_dir() is None) == off


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_help(command, files, capsys) -> None:
    _, out, _ = _run([command, "--help"], files, capsys, 0, "")
    assert out.startswith(f"usage: stepwall {command}"), out[:100]
