"""Files out: the one writer per format (TSV/CSV, TREC, Markdown, terminal text) and files moved into place; and
the one way a file RankScope wrote is read back (``read_back``)."""
