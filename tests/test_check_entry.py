"""`stepwall check` on a catalog entry: the probe scenario is written as TOML data (any path
reads back), and a scenario of another kind is skipped by the error's type, not its text."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import ROOT

from stepwall.core.errors import SpecError
from stepwall.model.compose import check_entry
from stepwall.spec.validation import UnknownKey, load_scenario
from stepwall.testing import registry

MODEL = ROOT / "specs" / "models" / "deepseek-r1-fp4.toml"


def test_an_entry_in_a_folder_of_any_name_is_checked(tmp_path: Path) -> None:
    folder = tmp_path / 'quote " back\\slash é'
    folder.mkdir()
    entry = folder / "m.toml"
    shutil.copy(MODEL, entry)
    assert check_entry(entry, "model", registry()) == []
    text = entry.read_text().replace("n_dense_layers = 3\n", "n_dense_layers = 99\n")
    entry.write_text(text)
    with pytest.raises(SpecError) as e:
        check_entry(entry, "model", registry())
    assert e.value.where == str(entry) and "n_dense_layers" in e.value.key


def test_an_unknown_key_is_its_own_error(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text('from = "k26-b300-tp8-ddtree"\n[model]\nn_layerz = 3\n')
    with pytest.raises(UnknownKey, match=r"model\.n_layerz: unknown key for model kind"):
        load_scenario(scenario, registry().kinds)
    scenario.write_text('from = "k26-b300-tp8-ddtree"\n[modle]\nn_layers = 3\n')
    with pytest.raises(UnknownKey, match="unknown key"):
        load_scenario(scenario, registry().kinds)
