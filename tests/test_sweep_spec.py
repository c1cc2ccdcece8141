"""Sweep files, --set overrides and the comparison table, against hand-computed answers."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from pucl.errors import ParamsError
from pucl.params.config import parse_assignments, parse_params
from pucl.params.sweeps import expand, parse_sweep, refit_spec, variant_overrides
from pucl.recipe.settings import apply_overrides
from pucl.reporting.tables import comparison_table, runs_frame, varying_params


def test_expand_is_the_cartesian_product_times_seeds():
    spec = parse_sweep({"name": "s", "seeds": [0, 3],
                        "grid": {"pretrain.loss": ["pucl", "punce"], "split.n_p": [100, 200, 400]},
                        "set": {"pretrain.epochs": 2}})
    points = expand(spec)
    expected = list(itertools.product(["pucl", "punce"], [100, 200, 400], [0, 3]))
    assert [(p.overrides["pretrain.loss"], p.overrides["split.n_p"], p.seed)
            for p in points] == expected
    assert all(p.overrides["pretrain.epochs"] == 2 and p.overrides["base.seed"] == p.seed
               for p in points)
    assert len({p.name for p in points}) == len(points) == 12
    assert points[0].name == "loss=pucl,n_p=100,s0"


def test_expand_uses_full_keys_when_short_names_collide():
    spec = parse_sweep({"name": "s", "grid": {"prior.method": ["km2"], "pupl.method": ["x"]}})
    assert expand(spec)[0].name == "prior.method=km2,pupl.method=x,s0"


def test_variants_cross_the_grid_and_override_set():
    spec = parse_sweep({"name": "s", "seeds": [0, 1],
                        "set": {"pretrain.loss": "sscl", "classifier.epochs": 5},
                        "grid": {"split.n_p": [100, 200]},
                        "variants": {"a": {"pretrain.loss": "pucl"},
                                     "b": {"pretrain.loss": "punce",
                                           "classifier.objective": "nnpu"}}})
    points = expand(spec)
    assert len(points) == 2 * 2 * 2
    assert points[0].name == "variant=a,n_p=100,s0"
    by_name = {p.name: p.overrides for p in points}
    assert by_name["variant=b,n_p=200,s1"] == {
        "pretrain.loss": "punce", "classifier.epochs": 5, "classifier.objective": "nnpu",
        "split.n_p": 200, "base.seed": 1}
    assert "classifier.objective" not in by_name["variant=a,n_p=200,s1"]


@pytest.mark.parametrize("raw, message", [
    ({"seeds": [0]}, "'name'"),
    ({"name": "s", "variants": {"a b": {}}}, "variant names"),
    ({"name": "s", "variants": {"a": {"base.seed": 3}}}, "dotted params other than"),
    ({"name": "a b"}, "letters, digits"),
    ({"name": "s", "seeds": []}, "'seeds'"),
    ({"name": "s", "seeds": [1, 1]}, "distinct"),
    ({"name": "s", "grid": {"loss": ["pucl"]}}, "dotted"),
    ({"name": "s", "grid": {"base.seed": [1]}}, "seeds"),
    ({"name": "s", "grid": {"split.n_p": []}}, "no values"),
    ({"name": "s", "grids": {}}, "unknown parameter 'grids'"),
    (["name"], "mapping"),
])
def test_bad_sweep_files_are_refused_with_the_bad_value(raw, message):
    with pytest.raises(ParamsError, match=message):
        parse_sweep(raw)


def test_assignments_keep_yaml_types():
    assert parse_assignments(["split.n_p=500", "pretrain.loss=punce", "split.prior=null",
                              "prior.km.refine_bandwidth=false", "pretrain.temperature=0.2"]) == {
        "split.n_p": 500, "pretrain.loss": "punce", "split.prior": None,
        "prior.km.refine_bandwidth": False, "pretrain.temperature": 0.2}
    with pytest.raises(ParamsError, match="expected key=value"):
        parse_assignments(["split.n_p"])


def test_overrides_set_nested_values_without_touching_the_input():
    raw = {"pretrain": {"augment": {"degrees": 10.0}, "loss": "pucl"}}
    out = apply_overrides(raw, {"pretrain.augment.degrees": 5.0, "split.n_p": 7})
    assert out == {"pretrain": {"augment": {"degrees": 5.0}, "loss": "pucl"},
                   "split": {"n_p": 7}}
    assert raw["pretrain"]["augment"]["degrees"] == 10.0
    with pytest.raises(ParamsError, match="'pretrain.loss' is a value"):
        apply_overrides(raw, {"pretrain.loss.x": 1})
    with pytest.raises(ParamsError, match="did you mean 'pretrain.temperature'"):
        parse_params(apply_overrides(raw, {"pretrain.temprature": 0.1}))


def _records():
    rows = []
    for i, (loss, seed) in enumerate(itertools.product(["pucl", "sscl"], [0, 1, 2])):
        acc = {"pucl": 0.9, "sscl": 0.8}[loss] + 0.01 * seed
        rows.append({"name": f"r{i}", "run_id": f"id{i}",
                     "params": {"pretrain.loss": loss, "base.seed": str(seed),
                                "split.n_p": "1000", "base.threads": str(1 + i % 2)},
                     "metrics": {"accuracy": acc, "gamma": 0.25, "f1": acc - 0.1}})
    return rows


def test_comparison_lists_only_params_that_differ():
    frame = runs_frame(_records())
    assert varying_params(frame) == ["pretrain.loss", "base.seed"]  # threads: execution only
    table = comparison_table(frame)
    assert len(table) == 6
    assert list(table.columns[:4]) == ["run", "pretrain.loss", "base.seed", "gamma"]
    assert "split.n_p" not in table.columns


def test_grouped_comparison_is_mean_and_population_std():
    table = comparison_table(runs_frame(_records()), by=["pretrain.loss"]).set_index(
        "pretrain.loss")
    for loss, base in (("pucl", 0.9), ("sscl", 0.8)):
        values = np.array([base, base + 0.01, base + 0.02])
        assert table.loc[loss, "accuracy"] == pytest.approx(values.mean())
        assert table.loc[loss, "accuracy_std"] == pytest.approx(values.std())
        assert table.loc[loss, "n"] == 3
    with pytest.raises(ValueError) as typo:
        comparison_table(runs_frame(_records()), by=["pretrain.los"])
    # the close name, and the params that differ, not every param of params.yaml
    assert str(typo.value).startswith("unknown parameter 'pretrain.los' for --by; did you "
                                      "mean 'pretrain.loss'? (params that differ between "
                                      "these runs: pretrain.loss, base.seed;")


def test_empty_comparison_has_no_rows():
    assert comparison_table(pd.DataFrame(columns=["run", "gamma", "accuracy"])).empty


def test_bench_table_prints_percent_beside_the_paper():
    from pucl.reporting.tables import bench_table

    frame = pd.DataFrame({"run": list("abcd"), "run_id": list("abcd"),
                          "variant": ["x", "x", "y", "y"], "base.seed": [0, 1, 0, 1],
                          "gamma": 0.1, "accuracy": [0.90, 0.92, 0.80, 0.80],
                          "prior_abs_error": [0.01, 0.03, 0.0, 0.0]})
    table = bench_table(comparison_table(frame, ["variant"]),
                        lambda row: {"x": 91.8}.get(row["variant"]))
    assert table.to_dict("records") == [
        {"variant": "x", "accuracy %": "91.0 +- 1.0", "paper %": "91.8",
         "ours - paper": "-0.8", "|prior error|": "0.0200", "n": 2},
        {"variant": "y", "accuracy %": "80.0 +- 0.0", "paper %": "-", "ours - paper": "-",
         "|prior error|": "0.0000", "n": 2}]


def test_reference_must_name_a_variant():
    with pytest.raises(ParamsError, match="unknown variants"):
        parse_sweep({"name": "s", "variants": {"a": {}}, "reference": {"b": 90.0}})


def test_references_per_grid_point_are_looked_up_by_the_points_name():
    from pucl.params.sweeps import reference_of

    spec = parse_sweep({"name": "s", "grid": {"data.task": ["a", "b"], "split.n_p": [1, 2]},
                        "variants": {"v": {}, "w": {}},
                        "reference": {"v": {"task=a,n_p=2": 90.0, "task=b,n_p=1": 80.0},
                                      "w": 70.0}})
    assert reference_of(spec, "v", {"data.task": "a", "split.n_p": 2}) == 90.0
    assert reference_of(spec, "v", {"data.task": "b", "split.n_p": 1}) == 80.0
    assert reference_of(spec, "v", {"data.task": "a", "split.n_p": 1}) is None
    assert reference_of(spec, "w", {"data.task": "b", "split.n_p": 2}) == 70.0
    assert reference_of(spec, "x", {"data.task": "b", "split.n_p": 2}) is None
    with pytest.raises(ParamsError, match=r"reference of 'v' names 'task=c,n_p=1', not a "
                                          r"grid point \(points: task=a,n_p=1, "):
        parse_sweep({"name": "s", "grid": {"data.task": ["a", "b"], "split.n_p": [1, 2]},
                     "variants": {"v": {}}, "reference": {"v": {"task=c,n_p=1": 1.0}}})


def test_default_must_name_a_variant():
    with pytest.raises(ParamsError, match="default names an unknown variant 'b'"):
        parse_sweep({"name": "s", "variants": {"a": {}}, "default": "b"})


def test_a_variant_as_one_run_layers_the_variant_over_the_presets_set():
    spec = parse_sweep({"name": "p", "set": {"split.n_p": 400, "pretrain.epochs": 5},
                        "variants": {"a": {"pretrain.epochs": 9}, "b": {"pretrain.loss": "punce"}},
                        "default": "b"})
    assert variant_overrides(spec) == ("b", {"split.n_p": 400, "pretrain.epochs": 5,
                                             "pretrain.loss": "punce"})
    assert variant_overrides(spec, "a") == ("a", {"split.n_p": 400, "pretrain.epochs": 9})
    with pytest.raises(ParamsError, match=r"unknown variant 'c' of preset p \(allowed: a, b\)"):
        variant_overrides(spec, "c")
    undecided = parse_sweep({"name": "q", "variants": {"a": {}}})
    with pytest.raises(ParamsError, match="preset q names no default variant"):
        variant_overrides(undecided)


def test_grouped_comparison_names_the_prior_source_and_minutes_per_seed():
    """The reports' columns: where the prior came from (an oracle anywhere wins, a number
    is `given`), and minutes per seed with a cached pretraining counted at its cost."""
    def record(name, variant, params, minutes, reused):
        return {"name": name, "run_id": name, "variant": variant, "minutes": minutes,
                "params": {"prior.method": "auto", "pretrain.prior": "estimate",
                           "classifier.prior": "estimate", **params},
                "metrics": {"accuracy": 0.9, "pretrain_seconds": 600.0,
                            "pretrain_reused": float(reused)}}

    frame = runs_frame([record("a", "fresh", {}, 12.0, False),
                        record("b", "fresh", {}, 14.0, False),
                        record("c", "cached", {"classifier.prior": "oracle"}, 2.0, True),
                        record("d", "number", {"classifier.prior": "0.3"}, 3.0, False),
                        record("e", "km", {"prior.method": "km2"}, 1.0, True)])
    table = comparison_table(frame, ["variant"]).set_index("variant")
    assert list(table.columns[:2]) == ["prior_source", "accuracy"]
    assert table["prior_source"].to_dict() == {"cached": "oracle", "fresh": "auto",
                                               "km": "km2", "number": "given"}
    assert table.loc["fresh", "minutes_per_seed"] == pytest.approx(13.0)
    assert table.loc["cached", "minutes_per_seed"] == pytest.approx(12.0)  # 2 + 600 s
    assert table.loc["number", "minutes_per_seed"] == pytest.approx(3.0)


def test_the_choice_reads_the_validation_estimate_never_the_test():
    from pucl.reporting.tables import bench_table, choice_lines, chosen

    # the test set prefers x everywhere; the validation estimate prefers y at n_p 100
    frame = pd.DataFrame({"run": list("abcdef"), "run_id": list("abcdef"),
                          "variant": ["x", "x", "y", "y", "z", "z"],
                          "split.n_p": [100, 1000] * 3, "gamma": 0.1,
                          "accuracy": [0.99, 0.99, 0.80, 0.80, 0.70, 0.70],
                          "val_est_accuracy": [0.90, 0.95, 0.93, 0.91, np.nan, np.nan]})
    grouped = comparison_table(frame, ["variant", "split.n_p"])
    columns = list(grouped.columns)
    assert columns.index("val_est_accuracy") < columns.index("accuracy")  # what chooses first
    within = grouped[chosen(grouped, ["split.n_p"])]
    assert within[["variant", "split.n_p"]].to_numpy().tolist() == [["x", 1000], ["y", 100]]
    assert grouped[chosen(grouped)]["variant"].tolist() == ["x"]  # 0.95: the best overall
    assert choice_lines(grouped, ["variant", "split.n_p"], ["split.n_p"]) == [
        "chosen by the validation estimate (val_est_accuracy 0.9500, from P and U alone): "
        "variant=x, split.n_p=1000",
        "chosen by the validation estimate (val_est_accuracy 0.9300, from P and U alone): "
        "variant=y, split.n_p=100"]
    table = bench_table(grouped, lambda row: None, ["split.n_p"])
    assert table["chosen"].tolist() == ["", "yes", "yes", "", "", ""]
    assert table["val est %"].tolist()[:2] == ["90.0 +- 0.0", "95.0 +- 0.0"]
    # a variant given the true prior is never chosen, however well it estimates itself
    oracle = grouped.assign(prior_source=["oracle", "oracle", "tedn", "tedn", "tedn", "tedn"])
    assert oracle[chosen(oracle)]["variant"].tolist() == ["y"]
    # runs without the estimate (val_fraction 0): nothing is chosen, no column claims it
    blind = grouped.assign(val_est_accuracy=np.nan)
    assert not chosen(blind).any() and choice_lines(blind, ["variant"]) == []
    assert "chosen" not in bench_table(blind, lambda row: None).columns


def test_a_refit_trains_the_chosen_variant_at_its_point_without_a_validation_part():
    spec = parse_sweep({
        "name": "b", "seeds": [3, 4], "grid": {"split.n_p": [100, 300]},
        "set": {"pretrain.epochs": 2, "split.val_fraction": 0.2},
        "variants": {"a": {"classifier.objective": "nnpu", "split.val_fraction": 0.3},
                     "c": {}},
        "reference": {"a": {"n_p=100": 90.0, "n_p=300": 91.0}, "c": 80.0}, "default": "c"})
    # the caller read the point back from a table: a numpy integer, not the spec's int
    again = refit_spec(spec, "a", {"split.n_p": np.int64(300)})
    assert (again.name, again.refit_of, again.seeds) == ("b-refit-300", "b", [3, 4])
    assert again.grid == {"split.n_p": [300]} and type(again.grid["split.n_p"][0]) is int
    assert list(again.variants) == ["a"] and list(again.reference) == ["a"]
    # a column with gaps reads integers back as floats
    assert refit_spec(spec, "a", {"split.n_p": 300.0}).grid == {"split.n_p": [300]}
    points = expand(again)
    assert [p.seed for p in points] == [3, 4]
    for point in points:  # the variant's own validation share gives way too
        assert point.overrides["split.val_fraction"] == 0.0
        assert point.overrides["split.n_p"] == 300
        assert point.overrides["classifier.objective"] == "nnpu"
        assert point.overrides["pretrain.epochs"] == 2


def test_a_refit_of_a_sweep_without_variants_sets_it_for_every_point():
    spec = parse_sweep({"name": "g", "seeds": [0], "set": {"split.val_fraction": 0.1}})
    again = refit_spec(spec, None, {})
    assert again.name == "g-refit" and again.variants == {}
    assert [p.overrides["split.val_fraction"] for p in expand(again)] == [0.0]
