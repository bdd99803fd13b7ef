"""Presentation: plotly figures, HTML and CSS built from the plain data ``retrieval`` returns.

Never imports Gradio, so the app's views and the CLI's offline HTML report share it:
``figures`` (evaluation, training and failure-count charts), ``embeddings`` (UMAP scatter and
similarity histograms), ``report`` (failure cards and the self-contained gallery file, with the
category names and definitions), ``search`` (the side-by-side columns), ``metric_tables`` (table cells).
"""
