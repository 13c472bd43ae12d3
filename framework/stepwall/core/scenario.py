"""A validated scenario, as plugins see it.

``scenario.model`` (or ``scenario.section("cluster.scale_up")``) is a read-only view of a
section, ``scenario.params.hardware.hbm_bandwidth`` the `Parameter` of a field, and
``scenario.kinds`` which kind each section has. Reading a numeric field's *value* while the
model is built makes the model's shape depend on it; such paths are recorded in ``reads``
(see `stepwall.model.compose.StepModel.structural_keys`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from stepwall.core.errors import SpecError
from stepwall.core.symbols import Parameter


@attrs.frozen
class Scenario:
    """A validated scenario: structured sections, SI values, and where each value came from."""

    name: str
    origin: str
    sections: Mapping[str, Any]
    kinds: Mapping[str, str]
    values: Mapping[Parameter, float]
    provenance: Mapping[str, str]  # spec path -> the file (or "--set") that set it
    sources: Mapping[str, str] = attrs.field(factory=dict)  # spec path -> cited source
    overrides: tuple[str, ...] = ()  # the --set assignments applied, in order
    warnings: tuple[str, ...] = ()  # values far outside their quantity's physical range
    # spec path -> (low, high) in SI for values given as ranges (`stepwall.analyses.ranges`);
    # ``values``
    # holds their nominal values
    ranges: Mapping[str, tuple[float, float]] = attrs.field(factory=dict)
    reads: set[str] = attrs.field(factory=set, eq=False, repr=False)
    by_path: dict[str, Parameter] = attrs.field(
        init=False,
        eq=False,
        repr=False,
        default=attrs.Factory(lambda self: {s.name: s for s in self.values}, takes_self=True),
    )

    @property
    def label(self) -> str:
        """The name, with the overrides applied to it: ``k26-b300-tp8-ddtree [parallel.tp=16]``."""
        return f"{self.name} [{', '.join(self.overrides)}]" if self.overrides else self.name

    def section(self, path: str) -> SectionView:
        return SectionView(self.sections[path], path, self.reads)

    def __getattr__(self, name: str) -> Any:
        sections = object.__getattribute__(self, "sections")
        if name in sections:
            return SectionView(sections[name], name, object.__getattribute__(self, "reads"))
        raise AttributeError(name)

    def stated_pair(self, section: str, first: str, second: str, what: str,
                    example: str) -> bool:  # fmt: skip
        """Whether ``section`` states both fields of a pair that only works together (a law's
        latency and bandwidth): True for both, False for neither, one without the other an
        error naming the missing key (``what`` says what the pair is, ``example`` shows it)."""
        view = self.section(section)
        given = (getattr(view, first) is not None, getattr(view, second) is not None)
        if given[0] == given[1]:
            return given[0]
        missing = second if given[0] else first
        raise SpecError(self.origin, f"{section}.{missing}",
                        f"missing: {what} states both {first} and {second}",
                        example)  # fmt: skip

    def parameter(self, path: str) -> Parameter | None:
        """The Parameter of a spec path in this scenario, or None."""
        return self.by_path.get(path)

    def value(self, path: str) -> float:
        sym = self.parameter(path)
        if sym is None:
            raise KeyError(path)
        self.reads.add(path)
        return self.values[sym]

    def numeric_paths(self) -> list[str]:
        """Every numeric field's path (``parallel.tp``, …), whether set or defaulted."""
        return sorted(
            f"{name}.{f.name}"
            for name, obj in self.sections.items()
            for f in attrs.fields(type(obj))
            if "dim" in f.metadata
        )

    def field(self, path: str) -> attrs.Attribute | None:  # type: ignore[type-arg]
        """The declaration of a numeric field (``parallel.tp``), or None."""
        section, _, name = path.rpartition(".")
        obj = self.sections.get(section)
        f = attrs.fields_dict(type(obj)).get(name) if obj is not None else None
        return f if f is not None and "dim" in f.metadata else None

    def file_of(self, path: str) -> str:
        """The file that set ``path`` (or "--set"); the scenario's own file when a plugin
        default supplied it."""
        section = path
        while section:
            if section in self.provenance:
                return self.provenance[section]
            section = section.rpartition(".")[0]
        return self.origin

    @property
    def params(self) -> Params:
        """Symbolic view: ``scenario.params.hardware.hbm_bandwidth`` is that Parameter."""
        return Params(self, "")


class SectionView:
    """Read-only access to one validated section (an attrs object of the owning plugin).

    Reading a numeric field records ``section.field`` in the scenario's ``reads``: a value
    read while the model is built decides its shape (which terms exist), so a sweep over that
    key builds one model per value instead of evaluating one model over all of them.
    """

    __slots__ = ("_obj", "_path", "_reads")

    def __init__(self, obj: Any, path: str, reads: set[str]) -> None:
        object.__setattr__(self, "_obj", obj)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_reads", reads)

    def __getattr__(self, name: str) -> Any:
        obj = object.__getattribute__(self, "_obj")
        value = getattr(obj, name)
        f = attrs.fields_dict(type(obj)).get(name)
        if f is not None and "dim" in f.metadata:
            object.__getattribute__(self, "_reads").add(f"{self._path}.{name}")
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"section {self._path} is read-only")

    @property
    def fields(self) -> type:
        """The attrs class of this section's kind."""
        return type(object.__getattribute__(self, "_obj"))


class Params:
    """``scenario.params.<section>.<field>``: the Parameters of a scenario by path."""

    def __init__(self, scenario: Scenario, prefix: str) -> None:
        self._scenario, self._prefix = scenario, prefix

    def __getattr__(self, name: str) -> Any:
        path = f"{self._prefix}{name}"
        if path in self._scenario.sections:
            return Params(self._scenario, path + ".")
        sym = self._scenario.parameter(path)
        if sym is None:
            raise AttributeError(f"parameter {path} is not part of this scenario")
        return sym
