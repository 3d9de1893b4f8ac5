"""The quality benchmark's harness (benchmarks/paper/quality/): a --quick run, resumed, reported."""

import json

import pytest

from benchmarks.paper.quality.__main__ import main
from service.sim.fashion import FASHION_DIR
from service.sim.streams import load_stream

FIELDS = {
    "stream",
    "protocol",
    "seed",
    "method",
    "label",
    "params",
    "max_rows",
    "rows",
    "dup",
    "n_actions",
    "majority",
    "rounds",
    "accuracy",
    "last20_accuracy",
    "seconds",
    "rounds_per_second",
}


@pytest.mark.slow
def test_quick_run_learns_resumes_and_reports(tmp_path):
    out, results = tmp_path / "q.jsonl", tmp_path / "RESULTS.md"
    args = ["--quick", "--streams", "balance", "--protocols", "duplicated", "--out", str(out)]
    main([*args, "--boosters", "adabandit", "--vw", "eps0.1", "squarecb"])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3
    for row in rows:
        assert FIELDS <= set(row)
        assert (row["rows"], row["dup"], row["rounds"], row["n_actions"]) == (150, 2, 300, 3)
        assert 0 < row["rounds_per_second"]
    # balance: 3 actions, chance 1/3; both learn well above it over the stream
    by = {(r["method"], r["label"]): r for r in rows}
    assert by[("adabandit", "default")]["accuracy"] > 0.5
    assert max(by[("vw", c)]["accuracy"] for c in ("eps0.1", "squarecb")) > 0.5
    main([*args, "--boosters", "adabandit"])  # resumed: nothing new
    assert len(out.read_text().splitlines()) == 3
    results.write_text("# R\n")
    main([*args, "--report", "--results", str(results)])
    text = results.read_text()
    assert "<!-- quality:start -->" in text and "| balance (3, 300) |" in text
    assert "adabandit default" in text and "squarecb" in text
    # a labelled setting goes to the history block, beside the defaults, not to the main tables
    main([*args, "--boosters", "adabandit", "--param", "n_learners=3", "--label", "small"])
    main([*args, "--report", "--results", str(results)])
    text = results.read_text()
    quality = text[text.index("<!-- quality:start -->"):text.index("<!-- quality:end -->")]
    history = text[text.index("<!-- quality-history:start -->"):]
    assert "adabandit small" not in quality and "adabandit default" in quality
    assert "VW best of grid" in quality and "**The targets**" in quality
    assert "**The targets**" not in history
    assert "| adabandit default | adabandit small | VW best of grid |" in history


def test_streams_have_their_shape():
    rbf = load_stream("rbf26", max_rows=200)
    assert (len(rbf), rbf.n_classes, len(rbf.features)) == (200, 26, 10)
    users = load_stream("userid", max_rows=2000)
    assert len({x["user"] for x in users.X}) > 300  # a high-cardinality string id
    if not (FASHION_DIR / "train-images-idx3-ubyte.gz").exists():
        pytest.skip("Debian's dataset-fashion-mnist is not installed")
    fashion = load_stream("fashion", max_rows=100)
    assert fashion.n_classes == 10 and all(0 <= v <= 1 for v in fashion.X[0].values())


def test_the_target_table_counts_against_the_shown_figures():
    from benchmarks.paper.quality.report import target_table

    def row(method, label, last20, stream="s", protocol="plain"):
        return {"stream": stream, "protocol": protocol, "method": method, "label": label,
                "last20_accuracy": last20, "n_actions": 4}

    rows = [row("adabandit", "default", 0.52), row("vw", "eps0.1", 0.5), row("vw", "bag5", 0.6),
            row("banditbbm", "default", 0.42), row("oco", "default", 0.41),
            row("egreedy_tree", "default", 0.3),
            row("adabandit", "default", 0.7, "t"), row("vw", "eps0.1", 0.69, "t")]
    lines = target_table(rows)
    assert "| s | plain | 0.520 | 0.600 | no | -0.100 | -0.110 | 0.300 (0.250) |" in lines
    assert "| t | plain | 0.700 | 0.690 | yes | – | – | – (0.250) |" in lines
    # -0.100 as shown is within 0.1 (float arithmetic alone would say 0.42 < 0.52 - 0.1)
    assert lines[-1].startswith("AdaBandit's defaults at or above VW's best of grid: 1 of 2 ")
    assert lines[-1].endswith(
        "within 0.1 of AdaBandit (or above): 1 of 4; `egreedy_tree` above chance: 1 of 2.")
    chance = [r if r["method"] != "egreedy_tree" else {**r, "last20_accuracy": 0.2502}
              for r in rows]  # 0.250 as shown: not above chance
    assert target_table(chance)[-1].endswith("above chance: 0 of 2.")


def test_hedge_trace_plays_the_duplicated_protocol():
    """benchmarks/paper/quality/hedge.py: one row per window, with the stream's duplication."""
    from benchmarks.paper.quality.hedge import trace

    rows = trace("wine", 1, {"n_learners": 3}, every=50, duplicated=True, max_rows=30)
    assert [r["round"] for r in rows] == [50, 100, 150]  # 30 rows x 5 = 150 rounds
    for r in rows:
        assert 0.0 <= r["played"] <= 1.0 and 0.0 <= r["model_played"] <= 1.0
    plain = trace("wine", 1, {"n_learners": 3}, every=50, max_rows=30)
    assert plain == []  # 30 rounds: no full window of 50


@pytest.mark.parametrize("duplicated", [False, True])
def test_misses_split_the_last_20_percent_of_a_cell(duplicated):
    """benchmarks/paper/quality/misses.py: exploration + prediction misses are exactly the
    wrong rounds of the same cell's last 20% (the same seed plays the same rounds)."""
    from benchmarks.paper.quality.misses import misses
    from boosters.registry import make_booster
    from service.sim.loop import simulate
    from service.sim.streams import dup_of, load_stream

    row = misses("wine", 2, "adabandit", {"n_learners": 3}, duplicated, max_rows=60)
    data = load_stream("wine", 60)
    model = make_booster("adabandit", n_actions=3, seed=2, n_learners=3)
    result = simulate(model, data, dup=dup_of("wine") if duplicated else 1, seed=2)
    wrong = row["exploration"] + row["prediction"]
    assert row["rounds"] == result.rounds - int(0.8 * result.rounds)
    assert wrong == round((1 - result.last20_accuracy) * row["rounds"])
    assert 0 < row["expected_exploration"] <= row["rounds"]


def test_heldout_report_judges_vw_choice_on_other_seeds(tmp_path):
    from benchmarks.paper.quality.heldout import heldout_report

    def lines(path, rows):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    def row(method, label, seed, last20):
        return {"stream": "s", "protocol": "plain", "seed": seed, "method": method,
                "label": label, "last20_accuracy": last20, "max_rows": 10, "max_dup": None,
                "params": {}}

    # on the main seeds eps0.01 wins; on the held-out seeds bag5 would, by luck of those seeds
    main_rows = [row("vw", "eps0.01", s, 0.9) for s in (1, 2, 3)]
    main_rows += [row("vw", "bag5", s, 0.8) for s in (1, 2, 3)]
    held = [row("adabandit", "default", s, a) for s, a in ((10, 0.85), (11, 0.9), (12, 0.8))]
    held += [row("vw", "eps0.01", s, a) for s, a in ((10, 0.8), (11, 0.9), (12, 0.85))]
    held += [row("vw", "bag5", s, 0.95) for s in (10, 11, 12)]
    text = heldout_report(lines(tmp_path / "m.jsonl", main_rows),
                          lines(tmp_path / "h.jsonl", held))
    # medians 0.85 and 0.85; paired differences +0.05, 0, -0.05
    assert ("| s | plain | 3 | eps0.01 | 0.850 / 0.850 | 0.850 / 0.850 | +0.000 ± 0.029 "
            "(1 / 1) | yes | 0.950 bag5 |") in text
    assert text.endswith("chosen on the main seeds: 1 of 1 cells; at or above VW's best of grid "
                         "chosen on the held-out seeds themselves: 0 of 1.")
    assert "Not run yet" in heldout_report(tmp_path / "m.jsonl", tmp_path / "none.jsonl")


def test_userid_bounds_rule_is_far_above_a_table_of_users():
    from benchmarks.paper.quality.userid_bounds import play

    table, _ = play("table", seeds=[1, 2])
    rule, _ = play("rule", seeds=[1, 2])
    assert 0.25 < table < 0.45  # the user alone: its best constant action is right half the time
    assert rule > 0.6 and rule > table + 0.2
    with pytest.raises(ValueError, match="player must be one of"):
        play("oracle")


def test_drift_shifts_every_class_at_the_change_and_the_booster_finds_them_again():
    """benchmarks/paper/quality/drift.py: the learned action is wrong after the change, and the
    booster's misses bring its exploration back until it plays the new classes."""
    from benchmarks.paper.quality.drift import drift_run, shifted

    assert [shifted(y, 3) for y in range(3)] == [1, 2, 0]
    row = drift_run("wine", 1, "adabandit", {"n_learners": 3}, window=50, max_rows=60)
    assert (row["rounds"], row["at"], len(row["after"])) == (300, 150, 3)
    assert row["before"] > 0.8 and row["after"][0] < row["before"] - 0.3
    assert row["after"][-1] > row["after"][0] + 0.1
