"""``python -m retrieval predict``: end to end on the demo corpus with a tiny encoder, the TSV read back
with the project's reader; a query file's texts (hostile to spreadsheets too) come back as written; bad
input is one error line."""
from __future__ import annotations

import pytest

from retrieval.cli import main
from retrieval.files import tabular
from retrieval.qpp.predictors import POST, PRE
from tests.conftest import DEMO


def test_predict_writes_every_query_hardest_first_fitted_on_the_judged_ones(tmp_path, tiny_model_dir, capsys):
    out = tmp_path / "reports" / "predicted.tsv"
    code = main(["predict", str(DEMO), "--model", str(tiny_model_dir), "--store", str(tmp_path / "s.sqlite3"),
                 "--systems", "bm25,dense,hybrid", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    header, *rows = tabular.read(out, "tsv")
    systems = ("bm25", "dense", "hybrid")
    assert header == (["query_id", "text", *PRE] + [f"{s}.{p}" for s in systems for p in POST] + ["disagreement"]
                      + [f"{s}.predicted" for s in systems] + ["difficulty"])
    from retrieval.data.readers import load_dataset

    ds = load_dataset(DEMO)
    assert {r[0]: r[1] for r in rows} == ds.queries  # every query, its text as it was
    difficulty = [float(r[-1]) for r in rows]
    assert difficulty == sorted(difficulty, reverse=True)
    for r in rows:
        predicted = [float(r[header.index(f"{s}.predicted")]) for s in systems]
        assert float(r[-1]) == pytest.approx(1 - sum(predicted) / 3)
    assert "fitted to nDCG@10 on" in err and f"predictions of {len(ds.queries)} queries" in err


def test_a_query_file_is_predicted_and_its_texts_come_back_as_written(tmp_path, capsys):
    queries = tmp_path / "mine.tsv"
    texts = {"a": "=HYPERLINK(\"x\")", "b": "how do I bake sourdough bread", "c": "zzqx-unknown"}
    queries.write_text("id\ttext\n" + "".join(f"{q}\t{t}\n" for q, t in texts.items()), encoding="utf-8")
    code = main(["predict", str(DEMO), "--no-store", "--systems", "bm25", "--queries", str(queries),
                 "--labels", "auto"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    header, *rows = tabular.loads(captured.out, "tsv")
    assert {r[0]: r[1] for r in rows} == texts
    assert "'=HYPERLINK" in captured.out  # guarded in the file, unguarded by the reader
    assert "label-free" in captured.err  # the file's queries are judged nowhere
    unknown = rows[[r[0] for r in rows].index("c")]
    assert unknown[header.index("bm25.nqc")] == ""  # BM25 finds nothing: its list's predictors left out
    assert [float(unknown[header.index(p)]) for p in PRE] == [0.0] * len(PRE)  # no term the corpus holds


@pytest.mark.parametrize("argv, said", [
    (["--queries", "{tmp}/absent.txt"], "absent.txt"),
    (["--out", "{tmp}"], "--out {tmp}: is a folder, not a file"),
    (["--systems", "bm25,nope"], "unknown system(s) nope"),
])
def test_bad_input_is_one_error_line(argv, said, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code = main(["predict", str(DEMO), "--no-store", *argv])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and said.replace("{tmp}", str(tmp_path)) in errors[0], err
