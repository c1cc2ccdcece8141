"""Params: the shipped file is valid, bad values are refused with clear messages."""

from __future__ import annotations

import pytest
import yaml

from pucl.errors import ParamsError
from pucl.params.config import Params, load_params, parse_params
from pucl.recipe.settings import flatten
from tests.conftest import ROOT


def test_shipped_params_are_valid_and_match_the_code_defaults():
    from pucl.recipe.checks import REGISTRY_CHOICES, check_methods

    params = load_params(ROOT / "params.yaml")
    check_methods(params)
    # params.yaml spells out the defaults, nothing else: the sections' own fields...
    for name in Params.model_fields:
        section, default = getattr(params, name), getattr(Params(), name)
        assert section.model_dump(exclude=set(section.model_extra or {})) == \
            default.model_dump(), name
    # ...and no method's settings: those live with the method (`pucl methods --settings`),
    # so params.yaml stays short and each default has one home
    for section_name in dict.fromkeys(s for s, *_ in REGISTRY_CHOICES):
        assert not getattr(params, section_name).model_extra, section_name


def test_params_yaml_stays_short():
    """At most 90 leaf params: every option a user meets costs them reading time."""
    import yaml

    def leaves(node) -> int:
        return sum(leaves(v) if isinstance(v, dict) else 1 for v in node.values())

    assert leaves(yaml.safe_load((ROOT / "params.yaml").read_text())) <= 90


@pytest.mark.parametrize("raw, message", [
    ({"pretrain": {"tempreature": 0.5}}, "did you mean 'pretrain.temperature'"),
    ({"pretrain": {"loss": "simclr"}}, "pretrain.loss"),
    ({"pretrain": {"temperature": 0}}, "greater than 0"),
    ({"split": {"n_p": 0}}, "split.n_p"),
    ({"prior": {"value": 1.5}}, "prior.value"),
    ({"base": {"device": "tpu"}}, "base.device"),
    ({"pretrain": {"members": 0}}, "pretrain.members.*greater than or equal to 1"),
    ({"pretrain": {"seed": -1}}, "pretrain.seed.*greater than or equal to 0"),
    ({"pretrain": {"members": 17}}, "pretrain.members.*less than or equal to 16"),
    ({"sweep": {}}, "unknown parameter 'sweep'"),
])
def test_bad_params_are_named(raw, message):
    from pucl.recipe.checks import check_methods

    with pytest.raises(ParamsError, match=message) as info:
        check_methods(parse_params(raw))  # method names are checked against the registries
    assert "\n" not in str(info.value)


def test_unreadable_params_file(tmp_path):
    bad = tmp_path / "params.yaml"
    bad.write_text("base: [unclosed")
    with pytest.raises(ParamsError, match="not valid YAML"):
        load_params(bad)
    with pytest.raises(ParamsError, match="not found"):
        load_params(tmp_path / "missing.yaml")


def test_flatten_for_mlflow():
    flat = flatten(Params().pretrain, "pretrain")
    assert flat["pretrain.augment.degrees"] == 10.0 and flat["pretrain.loss"] == "auto"


def test_yaml_round_trip():
    dumped = yaml.safe_dump(Params().model_dump())
    assert parse_params(yaml.safe_load(dumped)) == Params()


def test_writing_settings_changes_those_values_and_keeps_every_other_line(tmp_path):
    from pucl.params.editing import write_settings

    path = tmp_path / "params.yaml"
    original = (ROOT / "params.yaml").read_text()
    path.write_text(original)
    wanted = {"data.dataset": "tracked", "data.task": "given", "split.val_fraction": 0.15,
              "split.n_p": 1000}  # n_p holds 1000 already: not a change
    changed = write_settings(path, wanted, parse_params)
    assert changed == {"data.dataset": ("mnist5k", "tracked"), "data.task": ("mnist-i", "given"),
                       "split.val_fraction": ("auto", 0.15)}
    # an independent reading: the YAML as before with those three values changed
    expected = yaml.safe_load(original)
    expected["data"].update(dataset="tracked", task="given")
    expected["split"]["val_fraction"] = 0.15
    assert yaml.safe_load(path.read_text()) == expected
    before, after = original.splitlines(), path.read_text().splitlines()
    assert len(before) == len(after)
    edited = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert len(edited) == 3
    for old, new in edited:  # the comment stays, in its column where there is room
        assert "#" in old and old[old.index("#"):] == new[new.index("#"):]
        assert old.index("#") == new.index("#")
    assert write_settings(path, wanted, parse_params) == {}  # already so: untouched


def test_a_setting_that_does_not_validate_leaves_the_file_as_it_was(tmp_path):
    from pucl.params.editing import write_settings

    path = tmp_path / "params.yaml"
    path.write_text((ROOT / "params.yaml").read_text())
    before = path.read_bytes()
    with pytest.raises(ParamsError, match="val_fraction"):
        write_settings(path, {"split.val_fraction": 0.9}, parse_params)
    with pytest.raises(ParamsError, match="no section 'nosuch'"):
        write_settings(path, {"nosuch.key": 1}, parse_params)
    assert path.read_bytes() == before


def test_a_key_the_section_lacks_is_added_to_it(tmp_path):
    from pucl.params.editing import write_settings

    path = tmp_path / "params.yaml"
    path.write_text("data:\n  task: given   # a comment\nsplit:\n  n_p: 10\n")
    assert write_settings(path, {"split.val_fraction": 0.2}, lambda raw: None) == {
        "split.val_fraction": (None, 0.2)}
    assert path.read_text() == ("data:\n  task: given   # a comment\nsplit:\n"
                                "  val_fraction: 0.2\n  n_p: 10\n")


def test_only_the_sections_own_key_is_written_not_a_deeper_one_of_that_name(tmp_path):
    from pucl.params.editing import write_settings

    path = tmp_path / "params.yaml"
    path.write_text("prior:\n  heldout:\n    method: x   # deeper\n  method: tedn\n")
    write_settings(path, {"prior.method": "km2"}, lambda raw: None)
    assert path.read_text() == "prior:\n  heldout:\n    method: x   # deeper\n  method: km2\n"
