"""The flow's data is checked by attrs validators as it is made: numbers become sympy's,
labels must be text, keys a tuple, an op's kind one of the declared."""

from __future__ import annotations

import attrs
import pytest
import sympy as sp

from stepwall.core.errors import DimensionError, SpecError
from stepwall.core.options import option, structure_options
from stepwall.core.terms import OP_KINDS, Collective, Constraint, Op, Term, check_kinds
from stepwall.plugin.entries import BlockKind


def test_a_python_number_becomes_sympy_and_is_checked() -> None:
    t = Term("t", 0, "p", "why")
    assert t.expr == sp.Integer(0) and isinstance(t.expr, sp.Integer)
    with pytest.raises(DimensionError, match="a term must have dimension s"):
        Term("t", 1.5, "p", "why")
    with pytest.raises(DimensionError, match="a term must be a sympy expression, not str"):
        Term("t", "1", "p", "why")  # type: ignore[arg-type]


def test_labels_must_be_text() -> None:
    with pytest.raises(TypeError, match="term group must be text, not int 3"):
        Term("t", 0, "p", "why", group=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="constraint message must be text"):
        Constraint("c", sp.true, None, ("a",), "p")  # type: ignore[arg-type]


def test_op_fields_defaults_and_kinds() -> None:
    op = Op("o", 0, 0, "p", "why", "moe")
    assert (op.kernels, op.rows, op.serial_bytes) == (0, 0, 0)
    assert isinstance(op.kernels, sp.Integer)
    with pytest.raises(DimensionError, match="op kind 'conv' is not one of gemm"):
        check_kinds([Op("o", 0, 0, "p", "why", "moe", kind="conv")], OP_KINDS)  # the composer's
    with pytest.raises(TypeError, match="op kind must be text"):
        Op("o", 0, 0, "p", "why", "moe", kind=3)  # type: ignore[arg-type]
    with pytest.raises(DimensionError, match="op precision 'fp16' is not one of bf16"):
        Op("o", 0, 0, "p", "why", "moe", precision="fp16")
    with pytest.raises(DimensionError, match="op flops must have dimension"):
        Op("o", 0, 2.0, "p", "why", "moe")
    with pytest.raises(ValueError, match="collective c: unknown op 'gather'"):
        Collective("c", "gather", 1, 0, 1, "p", "why")


def test_constraint_keys_are_a_tuple_of_text() -> None:
    c = Constraint("c", sp.true, "m", ["a.b", "c.d"], "p")  # type: ignore[arg-type]
    assert c.keys == ("a.b", "c.d")
    for bad in ("a.b", None, ["a", 1]):
        with pytest.raises(TypeError, match="constraint keys must be a tuple of spec keys"):
            Constraint("c", sp.true, "m", bad, "p")  # type: ignore[arg-type]


@attrs.frozen
class _Options:
    top: int = 3


class _Report:
    where = "report.toml"


def test_a_block_kind_prepares_with_its_options_by_default() -> None:
    def mine(report: object, given: object, at: str) -> str:
        return "mine"

    assert (
        BlockKind("b", "doc", _Options, lambda r, o, at: [], prepare=mine).prepare(None, {}, "x")
        == "mine"
    )
    default = BlockKind("b", "doc", _Options, lambda r, o, at: [])
    assert default.prepare(_Report(), {"top": 5}, "blocks[0].") == _Options(top=5)
    with pytest.raises(SpecError, match=r"report.toml:blocks\[0\].tpo: unknown option"):
        default.prepare(_Report(), {"tpo": 5}, "blocks[0].")


@attrs.frozen
class _Inner:
    eps: float = option("a tolerance", default=0.1)


@attrs.frozen
class _Typed:
    top: int = option("how many", default=3)
    sizes: list[int] = option("sizes", default=attrs.Factory(list))
    inner: _Inner = option("inner options", default=attrs.Factory(_Inner))


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"top": "x"}, "r.toml:b.top: 'x' is not a whole number (expected how many)"),
        ({"sizes": [1, "a"]}, "r.toml:b.sizes: 'a' is not a whole number (expected sizes)"),
        ({"inner": {"eps": "x"}}, "r.toml:b.inner.eps: 'x' is not a number"),
    ],
)
def test_option_errors_name_the_option_from_cattrs_notes(
    given: dict[str, object], message: str
) -> None:
    """The failing option's name comes from cattrs' structured notes, nested ones joined."""
    with pytest.raises(SpecError) as e:
        structure_options(_Typed, given, "r.toml", "b.")
    assert str(e.value) == message
