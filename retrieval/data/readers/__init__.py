"""Reading documents, queries and relevance labels from the formats users have.

``load_dataset(path)`` detects the format of a folder, zip or single file;
``load_files(corpus, queries, qrels)`` assembles separately uploaded files;
``load_uploads(paths)`` sorts a batch of uploads into those roles (``detect_role``) first;
``read_qrels(path)`` reads BEIR (3-column TSV) or TREC (4-column) relevance labels;
``read_run(path, dataset, name)`` reads another system's run file (TREC ``qid Q0 docid rank score
tag`` or ranx JSON) into an ``ImportedRun``, matched to a data set's ids (``match_dataset``).

Input that cannot be loaded raises :class:`DataError` reading ``file:line: problem``.
Input that can be loaded with losses (empty texts, labels pointing nowhere) loads, and each
loss is recorded in ``dataset.report``.

Modules, in the order the data goes through them:

- ``decode``: a file as a stream of strict UTF-8 lines, numbered (``Text``), with progress by bytes;
- ``records``: JSONL objects and CSV/TSV rows with the line each starts on, field checks,
  and the sink that collects id/text records;
- ``documents``, ``queries``, ``qrels``: one reader per kind of file (``qrels`` also matches
  the labels to the documents and queries that loaded);
- ``runs``: run files of other systems, read and matched to a loaded data set's ids;
- ``trees`` and ``safezip``: a folder or a zip archive (read in memory, under limits) seen
  as one tree of files;
- ``assembly``: the public entry points, which put the parts together into a ``Dataset``.

Files on disk are never read whole: documents, queries, qrels and TREC runs are parsed line by line
as they are decoded, so memory holds the records, not the file. (A zip member is read whole,
under the archive's limits, and a ranx JSON run is one JSON object.)
"""
from retrieval.data.readers.assembly import detect_role, load_dataset, load_files, load_uploads
from retrieval.data.readers.qrels import read_qrels
from retrieval.data.readers.runs import ImportedRun, match_dataset, read_run
from retrieval.data.readers.safezip import DEFAULT_MAX_BYTES

__all__ = ["load_dataset", "load_files", "load_uploads", "read_qrels", "detect_role",
           "read_run", "match_dataset", "ImportedRun", "DEFAULT_MAX_BYTES"]
