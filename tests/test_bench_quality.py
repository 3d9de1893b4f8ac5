"""The quality benchmark's harness (benchmarks/paper/quality/): a --quick run, resumed, reported."""

import json

import pytest

from benchmarks.paper.bopl_repro import FASHION_DIR
from benchmarks.paper.quality.__main__ import main
from benchmarks.paper.quality.streams import load_stream

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


def test_streams_have_their_shape():
    rbf = load_stream("rbf26", max_rows=200)
    assert (len(rbf), rbf.n_classes, len(rbf.features)) == (200, 26, 10)
    users = load_stream("userid", max_rows=2000)
    assert len({x["user"] for x in users.X}) > 300  # a high-cardinality string id
    if not (FASHION_DIR / "train-images-idx3-ubyte.gz").exists():
        pytest.skip("Debian's dataset-fashion-mnist is not installed")
    fashion = load_stream("fashion", max_rows=100)
    assert fashion.n_classes == 10 and all(0 <= v <= 1 for v in fashion.X[0].values())
