"""Files out: the one writer per format (TSV/CSV, TREC, Markdown, terminal text) and files moved into place."""
