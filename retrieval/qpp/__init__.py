"""Query performance prediction: which queries are likely to fail, without labels.

``predictors`` — the predictors as pure functions, each with its formula and citation, and their
declaration (``PREDICTORS``); ``combine`` — the label-free and the fitted combination; ``statistics`` — the
corpus's term statistics the predictors read, kept per corpus; ``corpus_score`` — s(D), each system's score
of the corpus as one document; ``predict`` — every query of a workspace predicted (``predict.predict``),
cached in the store. The formulas and their papers: ``docs/qpp.md``.
"""
