"""Data in: the data set, its readers, the queries added to it and its language."""
