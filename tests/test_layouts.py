"""The layouts a search tries come from the scenario's parallel kind (``stepwall_layouts``),
not from field names in the search: the built-in kind's table against a plain enumeration,
and a throwaway kind that offers tensor parallelism only, searched through its own hook."""

from __future__ import annotations

import json
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import attrs
import numpy as np
import pytest

from stepwall.core.fields import KindSpec
from stepwall.plugin.entries import Layouts, LayoutTable
from stepwall.plugin.hookspecs import hookimpl
from stepwall.plugins import parallelism
from stepwall.testing import PluginKit

SEARCH = ("search", "deepseek-v3-fp8", "--hardware", "h200", "--cluster", "hgx-h200-ib",
          "--engine", "trtllm", "--batch", "1,8,64", "--json", "-q")  # fmt: skip


def _rows(table: LayoutTable, keys: Sequence[str]) -> list[tuple[int, ...]]:
    cols = [table.gpus, *(table.degrees[k] for k in keys), table.ranks]
    return [tuple(int(c[i]) for c in cols) for i in range(len(table.gpus))]


@pytest.mark.parametrize("pp", [1, 2, 3])
@pytest.mark.parametrize(("gpus", "domain"), [((8,), 8), ((6, 8, 12), 4), ((72,), 72), ((1,), 1)])
def test_the_builtin_kind_lists_every_tp_ep_dp_pp_of_n_gpus(
    gpus: tuple[int, ...], domain: int, pp: int
) -> None:
    """At the scenario's pp stages, every tp·ep·dp·pp = N (a size pp does not divide has
    none); the stages are set per variant, so pp is not a column."""
    layouts = parallelism.stepwall_layouts(
        scenario=SimpleNamespace(parallel=SimpleNamespace(pp=pp))
    )
    assert layouts.keys == ("parallel.tp", "parallel.ep", "parallel.dp")
    table = layouts.table(gpus, domain)
    # every split of N into tp·ep·dp·pp with tp within the domain; attention ranks = ep
    want = [(n, tp, ep, n // (tp * ep * pp), ep) for n in gpus for tp in range(1, n + 1)
            for ep in range(1, n + 1) if n % (tp * ep * pp) == 0 and tp <= domain]  # fmt: skip
    got = _rows(table, layouts.keys)
    assert sorted(got) == sorted(want) and len(got) == len(set(got))
    assert layouts.count(gpus, domain) == len(want)
    assert all(
        isinstance(c, np.ndarray) for c in (table.gpus, table.ranks, *table.degrees.values())
    )


@attrs.frozen
class _TpOnly:
    """No fields beyond the standard kind's (which it extends)."""


def _tp_table(gpus: Sequence[int], domain: int) -> LayoutTable:
    n = np.array([g for g in gpus if g <= domain], dtype=float)
    return LayoutTable(n, {"parallel.tp": n}, np.ones_like(n))


class TpOnly:
    """A parallel kind ``tp-only`` (the standard kind's fields) whose search tries tensor
    parallelism alone; ``layouts=False``: its plugin lists none."""

    def __init__(self, layouts: bool = True) -> None:
        self.layouts = layouts

    @hookimpl
    def stepwall_spec_kinds(self) -> list[KindSpec]:
        return [KindSpec("parallel", "tp-only", _TpOnly, "TP only",
                         extends=("parallel", "standard"))]  # fmt: skip

    @hookimpl
    def stepwall_partition(self, scenario: Any, decoding: Any) -> Any:
        return parallelism.stepwall_partition(scenario, decoding)

    @hookimpl
    def stepwall_layouts(self, scenario: Any) -> Layouts | None:
        count = lambda gpus, domain: sum(1 for g in gpus if g <= domain)  # noqa: E731
        return Layouts(("parallel.tp",), _tp_table, count) if self.layouts else None


def test_a_kinds_own_layouts_are_what_the_search_tries() -> None:
    kit = PluginKit()(TpOnly())
    code, out, err = kit.cli(*SEARCH, "--gpus", "1,2,4,8,16", "--set", "parallel.kind=tp-only")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["evaluated"] == 4 * 3  # N = 1, 2, 4, 8 within the 8-GPU domain, 3 batches
    assert doc["frontier"]
    for p in doc["frontier"]:
        c = p["config"]
        assert c["tp"] == c["gpus"] and "ep" not in c and "dp" not in c
        assert c["users_per_rank"] == c["concurrency"]  # one attention rank per replica
        # the kind's degree, the deployment's one node (at most 8 GPUs, one 8-GPU domain),
        # the users
        assert p["command"].endswith(f"--set parallel.tp={c['tp']} --set cluster.nodes=1 "
                                     f"--set workload.concurrency={c['concurrency']}")  # fmt: skip
        assert "parallel.ep=" not in p["command"]
    code, out, err = kit.cli(*SEARCH[:-2], "--gpus", "8", "--set", "parallel.kind=tp-only")
    assert code == 0 and " tp8 C=" in out and " ep" not in out, err
    # a degree the built-in kind searches is free to set here: this kind does not search it
    code, _, err = kit.cli(*SEARCH, "--gpus", "8", "--set", "parallel.kind=tp-only",
                           "--set", "parallel.ep=2")  # fmt: skip
    assert code == 0, err
    code, _, err = kit.cli(*SEARCH, "--gpus", "8", "--set", "parallel.kind=tp-only",
                           "--set", "parallel.tp=2")  # fmt: skip
    assert code == 2 and "search:--set: parallel.tp is searched" in err


def test_a_kind_without_layouts_is_not_searched() -> None:
    kit = PluginKit()(TpOnly(layouts=False))
    code, out, err = kit.cli(*SEARCH, "--gpus", "8", "--set", "parallel.kind=tp-only")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "search:parallel: kind 'tp-only' lists no layouts to search" in err


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (("--set", "parallel.tp=abc"), "search:--set: parallel.tp is searched "),
        (("--set", "workload.concurrency=abc"), "search:--set: workload.concurrency is searched "),
        (("--vary", "parallel.ep=a,b"), "search:--vary: parallel.ep is searched already "),
        (("--set", "hardware.hbm_bandwidth=abc"), "--set:hardware.hbm_bandwidth: cannot read"),
    ],
)
def test_a_searched_key_is_refused_whatever_its_value(given: tuple[str, str], says: str) -> None:
    code, out, err = PluginKit().cli(*SEARCH, "--gpus", "8", *given)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"stepwall: error: {says}"), err
