"""A corpus's language, BM25's tokenizer for it, and the English-only encoder check (real py3langid,
real PyStemmer)."""
from __future__ import annotations

from retrieval.data.language import detect_language, encoder_mismatch, tokenizer_for
from retrieval.data.readers import load_dataset
from tests.conftest import DEMO

FRENCH = ["Le robinet de la cuisine fuit depuis hier soir et l'eau coule sur le sol.",
          "Pour changer un joint usé, coupez d'abord l'arrivée d'eau sous l'évier.",
          "Les pommes coupées brunissent à l'air ; un peu de jus de citron les protège.",
          "Le train pour Lyon part à huit heures de la gare principale.",
          "Arrosez les tomates le matin plutôt que le soir pour éviter les maladies."]


def test_the_demo_is_english_and_keeps_the_english_tokenizer():
    docs = [d.full_text for d in load_dataset(DEMO).docs.values()]
    guess = detect_language(docs)
    assert guess.code == "en" and guess.share > 0.95 and guess.sampled == 200
    assert detect_language(docs) == guess  # seeded: the same sample every time
    assert tokenizer_for("en").config == {"lowercase": True, "stopwords": "en", "stemmer": "english"}
    assert not encoder_mismatch(guess, "all-MiniLM-L6-v2")


def test_a_french_corpus_gets_french_stemming_and_a_warning_for_an_english_encoder():
    guess = detect_language(FRENCH + ["The kettle is boiling."])
    assert guess.code == "fr" and guess.share == 5 / 6 and guess.counts["en"] == 1
    tok = tokenizer_for("fr")
    # plural and singular, masculine and feminine stem alike; "les" and "une" are stopwords
    assert tok("Les pommes coupées brunissent") == tok("une pomme coupée brunit") == ["pomm", "coup", "brun"]
    assert tok.config == {"lowercase": True, "stopwords": "fr", "stemmer": "french"}
    assert encoder_mismatch(guess, "all-MiniLM-L6-v2")
    assert not encoder_mismatch(guess, "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2")


def test_a_language_without_snowball_keeps_words_whole():
    tok = tokenizer_for("ja")
    assert tok.config == {"lowercase": True, "stopwords": None, "stemmer": None}
    assert tok("Running runners") == ["running", "runners"]
    assert detect_language([]).sampled == 0


def test_the_setting_overrides_detection_in_the_cli(tmp_path, tiny_model_dir):
    import json

    from retrieval import cli
    from retrieval.data.language import corpus_tokenizer

    assert corpus_tokenizer(FRENCH).config["stemmer"] == "french"
    assert corpus_tokenizer(FRENCH, "en").config["stemmer"] == "english"
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"f{i}", "text": t}) + "\n" for i, t in enumerate(FRENCH)))
    for setting, stemmer in (("auto", "french"), ("de", "german")):
        args = cli.build_parser().parse_args(["search", str(corpus), "robinet", "--no-store", "--language", setting,
                                              "--model", str(tiny_model_dir)])
        _, ws = cli._open(args)
        assert ws.tokenizer.config["stemmer"] == stemmer
    hits = ws.bm25.search({"q": "les pommes"}, 3)["q"]  # German rules on French text: still exact words match
    assert hits and hits[0][0] == "f2"
