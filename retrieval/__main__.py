from retrieval.cli import entry_point

entry_point()
