"""Rows read back from the store are checked as they were on input.

The store is a file: another program, an old version, a crash or a person with ``sqlite3`` can put
anything in it. What ``retrieval.store.Store`` reads back is therefore held to the shape RankScope
writes — a grade in ``judgments.GRADES``, ids ``safe_names.id_problem`` accepts, a judge's name
``judgments.check_judge`` accepts, blobs that decompress and decode to the objects they were made
from, runs whose hits are ``[document, score]`` pairs. A row that is not is left out of what the
reader returns (never exported, evaluated or shown) and said in one logged warning per read, naming
the table, how many rows and the first row's problem; a cached computation (a run, an evaluation)
that is not is a miss, computed again and written over. No row is read past its size: a compressed
one inflates within the ceiling of its kind, a JSON text is measured before it is parsed
(``retrieval.row_bounds``). Vectors (embeddings, learned sparse
vectors, 2-D projections) are held to their declared lengths and to finite numbers, so a forged
length never sizes an array and a NaN never reaches a FAISS index or a score.

Each check returns the problem in words, or None for a row of the right shape.
"""
from __future__ import annotations

import json
import logging
import math
import zlib
from collections.abc import Iterable
from typing import Any, TypeGuard

import numpy as np

from retrieval import row_bounds
from retrieval.judging.grades import GRADES, check_judge_key
from retrieval.row_bounds import Shape
from retrieval.safe_names import file_name_problem, id_problem

log = logging.getLogger(__name__)
_GRADES = frozenset(GRADES)


def unpacked(blob: object, what: str, shape: Shape | None = None) -> tuple[object, str | None]:
    """(the object ``retrieval.store.keys.pack`` made ``blob`` from, None) or (None, why it does not unpack: "its
    ``what`` do not unpack (…)"). ``what`` is the row's kind (``row_bounds.CEILINGS``): past its
    ceiling for data sets of ``shape`` the blob is not inflated further, and does not unpack."""
    if not isinstance(blob, bytes):
        return None, f"its {what} are {type(blob).__name__}, not packed bytes"
    try:
        return json.loads(row_bounds.inflate(blob, row_bounds.ceiling(what, shape))), None
    except (zlib.error, ValueError, RecursionError) as err:  # cut, edited or too large: zlib's, UTF-8's, JSON's
        return None, f"its {what} do not unpack ({err})"


def _be(what: str) -> str:
    return "are" if what in ("files", "metrics", "losses") else "is"  # its losses are, its config is


def text_problem(text: object, what: str, shape: Shape | None = None) -> str | None:
    """Why the JSON text of a column of kind ``what`` (``row_bounds.CEILINGS``) is not parsed: not
    text, or longer than its kind's ceiling for data sets of ``shape``; None when it may be."""
    if not isinstance(text, str):
        return f"its {what} {_be(what)} {type(text).__name__}, not JSON text"
    limit = row_bounds.ceiling(what, shape)
    if len(text) > limit:
        return f"its {what} {_be(what)} {len(text):,} characters, past the {limit:,} such a column holds"
    return None


def loaded(text: object, what: str, shape: Shape | None = None) -> tuple[object, str | None]:
    """(the value of the JSON text ``text`` of a column of kind ``what``, None) or (None, why it is
    not read: ``text_problem``'s, measured before it is parsed, or not JSON)."""
    problem = text_problem(text, what, shape)
    if problem is not None or not isinstance(text, str):  # text_problem refuses what is not text
        return None, problem
    try:
        return json.loads(text), None
    except (ValueError, RecursionError) as err:
        return None, f"its {what} {_be(what)} not JSON ({str(err)[:80]})"


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _id(value: object, what: str) -> str | None:
    if not isinstance(value, str):
        return f"its {what} is {type(value).__name__}, not text"
    if not value:
        return f"its {what} is empty"
    problem = id_problem(value)
    return None if problem is None else f"its {what} {value[:40]!r} {problem}"


class JudgmentCheck:
    """Checks judgment rows, each judge's name once (a million rows hold few judges)."""

    def __init__(self) -> None:
        self._judges: dict[str, str | None] = {}

    def problem(self, row: dict[str, Any]) -> str | None:
        get = row.get
        grade, query, doc, judge, text = get("grade"), get("query_id"), get("doc_id"), get("judge"), get("query_text")
        if type(grade) is int and grade in _GRADES and type(query) is str and type(doc) is str \
                and type(judge) is str and self._judges.get(judge, "") is None and query and doc \
                and id_problem(query) is None and id_problem(doc) is None and (text is None or type(text) is str) \
                and _number(get("time")):
            return None  # the common case, in one pass (a million rows are read at once)
        return self._problem(row)

    def _problem(self, row: dict[str, Any]) -> str | None:
        grade = row.get("grade")
        if type(grade) is not int or grade not in _GRADES:
            return f"grade {grade!r} is not one of {', '.join(map(str, GRADES))}"
        for what in ("query_id", "doc_id"):
            problem = _id(row.get(what), what.replace("_", " "))
            if problem is not None:
                return problem
        judge = row.get("judge")
        if not isinstance(judge, str):
            return f"its judge is {type(judge).__name__}, not text"
        if judge not in self._judges:
            try:
                check_judge_key(judge)
                self._judges[judge] = None
            except ValueError as err:
                self._judges[judge] = str(err)
        if self._judges[judge] is not None:
            return self._judges[judge]
        if not isinstance(row.get("query_text"), (str, type(None))):
            return "its query text is not text"
        if not _number(row.get("time")):
            return "its time is not a number"
        return None


def hits_problem(run: object) -> str | None:
    """Why a stored run is not ``{query id: [[document id, score], …]}``."""
    if not isinstance(run, dict):
        return "its hits are not an object of queries"
    for query, hits in run.items():
        if not isinstance(hits, list):
            return f"the hits of query {query[:40]!r} are not a list"
        for hit in hits:
            if not (isinstance(hit, list) and len(hit) == 2 and isinstance(hit[0], str) and _number(hit[1])):
                return f"a hit of query {query[:40]!r} is not a [document, score] pair"
    return None


def metrics_problem(metrics: object, per_query: object) -> str | None:
    """Why a stored evaluation is not ``({name: number or null}, {name: {…}})``."""
    if not isinstance(metrics, dict) or not all(v is None or _number(v) for v in metrics.values()):
        return "its metrics are not an object of numbers"
    if not isinstance(per_query, dict) or not all(isinstance(v, dict) for v in per_query.values()):
        return "its per-query values are not an object of objects"
    return None


def query_set_problem(row: dict[str, Any], queries: object) -> str | None:
    """Why a stored query set (its row, its unpacked queries) is not one RankScope keeps."""
    if not isinstance(row.get("id"), str) or not row["id"]:
        return "its id is not text"
    if not isinstance(row.get("name"), str):
        return "its name is not text"
    if not isinstance(queries, dict):
        return "its queries are not an object of ids and texts"
    for qid, text in queries.items():
        problem = _id(qid, "query id")
        if problem is not None:
            return problem
        if not isinstance(text, str):
            return f"the text of query {qid[:40]!r} is not text"
    if row.get("n") != len(queries):
        return f"it says {row.get('n')!r} queries and holds {len(queries):,}"
    if not _number(row.get("created")):
        return "its time is not a number"
    return None


def sample_problem(row: dict[str, Any], query_ids: object) -> str | None:
    """Why a stored judging sample (its row, its unpacked query ids) is not one RankScope keeps."""
    if not isinstance(row.get("id"), str) or not row["id"]:
        return "its id is not text"
    if not isinstance(row.get("method"), str):
        return "its method is not text"
    if type(row.get("seed")) is not int:
        return "its seed is not a whole number"
    if not isinstance(query_ids, list):
        return "its query ids are not a list"
    for qid in query_ids:
        problem = _id(qid, "query id")
        if problem is not None:
            return problem
    if not _number(row.get("created")):
        return "its time is not a number"
    return None


JOB_FIELDS = {"config": dict, "progress": dict, "losses": list}  # decoded JSON fields and the kind each must be


def job_problem(row: dict[str, Any]) -> str | None:
    """Why a stored training job (decoded) is not one RankScope keeps."""
    if not isinstance(row.get("id"), str) or not row["id"]:
        return "its id is not text"
    if not isinstance(row.get("status"), str):
        return "its status is not text"
    for key, kind in JOB_FIELDS.items():
        if row.get(key) not in (None, "") and not isinstance(row[key], kind):
            return f"its {key} is not {'an object' if kind is dict else 'a list'}"
    for key in ("dataset", "dataset_name", "model_path", "error", "device", "kind", "owner"):
        if not isinstance(row.get(key), (str, type(None))):
            return f"its {key} is not text"
    return None


def left_out(table: str, problems: list[str]) -> None:
    """One warning for the rows of ``table`` a read left out: how many, and the first one's problem."""
    if problems:
        more = f" (and {len(problems) - 1:,} more)" if len(problems) > 1 else ""
        log.warning("%s: left out %s damaged row%s: %s%s", table, f"{len(problems):,}",
                    "" if len(problems) == 1 else "s", problems[0], more)


def _positive(value: object) -> TypeGuard[int]:
    return type(value) is int and value > 0


def vectors(rows: Iterable[tuple[str, object, object]], dim: int | None) -> tuple[dict[str, np.ndarray], list[str]]:
    """``({text hash: float32 vector}, problems)`` from ``(text hash, dim, vector bytes)`` rows of the
    embeddings table: a vector whose bytes are not its row's ``dim`` × 4, whose ``dim`` is not ``dim``
    (when known) or that holds NaN or ±inf is a problem, not a vector. The vectors of one dimension
    are checked together (one array, not one numpy call a row)."""
    out: dict[str, np.ndarray] = {}
    problems: list[str] = []
    by_dim: dict[int, list[tuple[str, bytes]]] = {}
    for h, d, blob in rows:
        if not isinstance(blob, bytes):
            problem = f"its vector is {type(blob).__name__}, not bytes"
        elif not _positive(d):
            problem = f"its dim {d!r:.40} is not a positive whole number"
        elif len(blob) != 4 * d:
            problem = f"its vector is {len(blob):,} bytes where its dim {d:,} needs {4 * d:,}"
        elif dim is not None and d != dim:
            problem = f"its vector has {d:,} dimensions, the model's have {dim:,}"
        else:
            by_dim.setdefault(d, []).append((h, blob))
            continue
        problems.append(f"vector {str(h)[:12]}: {problem}")
    for d, held in by_dim.items():
        matrix = np.frombuffer(b"".join(blob for _, blob in held), dtype=np.float32).reshape(len(held), d)
        finite = np.all(np.isfinite(matrix), axis=1).tolist()
        for (h, _), vector, ok in zip(held, matrix, finite):
            if ok:
                out[h] = vector
            else:
                problems.append(f"vector {h[:12]}: it holds NaN or infinity")
    return out, problems


def sparse_vectors(rows: Iterable[tuple[str, object, object]], vocab_size: int | None
                   ) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], list[str]]:
    """``({text hash: (int32 term ids, float32 weights)}, problems)`` from ``(text hash, terms bytes,
    weights bytes)`` rows of the sparse_vectors table: as many terms as weights, each term id in
    0..``vocab_size``-1 (≥ 0 when the size is not known), every weight finite. Checked over all the
    rows' terms and weights at once."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    problems: list[str] = []
    held: list[tuple[str, bytes, bytes]] = []
    for h, terms, weights in rows:
        if not isinstance(terms, bytes) or not isinstance(weights, bytes):
            problem = f"its terms or weights are {type(terms).__name__} and {type(weights).__name__}, not bytes"
        elif len(terms) % 4 or len(terms) != len(weights):
            problem = f"its terms are {len(terms):,} bytes and its weights {len(weights):,} (4 bytes each, as many)"
        else:
            held.append((h, terms, weights))
            continue
        problems.append(f"sparse vector {str(h)[:12]}: {problem}")
    if not held:
        return out, problems
    lengths = np.array([len(t) // 4 for _, t, _ in held], dtype=np.int64)
    terms = np.frombuffer(b"".join(t for _, t, _ in held), dtype=np.int32)
    weights = np.frombuffer(b"".join(w for _, _, w in held), dtype=np.float32)
    bad = (terms < 0) | ~np.isfinite(weights)
    if vocab_size is not None:
        bad |= terms >= vocab_size
    damaged = set(np.repeat(np.arange(len(held)), lengths)[bad].tolist()) if bad.any() else set()
    ends = np.cumsum(lengths).tolist()
    start = 0
    for i, ((h, _, _), end) in enumerate(zip(held, ends)):
        if i in damaged:
            where = f"0..{vocab_size - 1:,}" if vocab_size is not None else "0 and up"
            problems.append(f"sparse vector {h[:12]}: a term id outside {where} or a weight that is not finite")
        else:
            out[h] = (terms[start:end], weights[start:end])
        start = end
    return out, problems


def projection_problem(points: object, xy: object, seconds: object) -> str | None:
    """Why a stored 2-D projection (its ``points``, ``xy`` bytes, fit ``seconds``) is not one RankScope keeps."""
    if not _positive(points):
        return f"its point count {points!r:.40} is not a positive whole number"
    if not isinstance(xy, bytes) or len(xy) != points * 2 * 4:
        size = f"{len(xy):,} bytes" if isinstance(xy, bytes) else type(xy).__name__
        return f"its coordinates are {size} where {points:,} points need {points * 8:,} bytes"
    if not np.isfinite(np.frombuffer(xy, dtype=np.float32)).all():
        return "its coordinates hold NaN or infinity"
    if not _number(seconds) or not math.isfinite(seconds):
        return "its fit time is not a number"
    return None


def judge_problem(name: object, checked: dict[str, str | None]) -> str | None:
    """Why a stored judge's key is not one ``check_judge_key`` accepts: a name ``check_judge`` accepts, or a
    private judge's key (``checked`` remembers each key's answer)."""
    if not isinstance(name, str):
        return f"its judge is {type(name).__name__}, not text"
    if name not in checked:
        try:
            check_judge_key(name)
            checked[name] = None
        except ValueError as err:
            checked[name] = str(err)
    return checked[name]


def _json_object(text: object, what: str) -> str | None:
    value, problem = loaded(text, what)
    if problem is not None:
        return problem
    return None if isinstance(value, dict) else f"its {what} is not a JSON object"


def model_problem(row: dict[str, Any]) -> str | None:
    """Why a row of the models table (``register_model``'s) is not one RankScope keeps."""
    if not isinstance(row.get("fingerprint"), str) or not row["fingerprint"]:
        return "its fingerprint is not text"
    if not isinstance(row.get("name"), str):
        return "its name is not text"
    if not _positive(row.get("dim")):
        return f"its dim {row.get('dim')!r:.40} is not a positive whole number"
    if not _number(row.get("created")):
        return "its time is not a number"
    return _json_object(row.get("info"), "info")


def dataset_problem(row: dict[str, Any]) -> str | None:
    """Why a row of the datasets table (``register_dataset``'s) is not one RankScope keeps."""
    if not isinstance(row.get("hash"), str) or not row["hash"]:
        return "its hash is not text"
    if not isinstance(row.get("name"), str):
        return "its name is not text"
    if not _number(row.get("created")):
        return "its time is not a number"
    return _json_object(row.get("summary"), "summary")


def run_row_problem(row: dict[str, Any]) -> str | None:
    """Why a row of the runs table, as ``Store.runs`` lists it (no hits), is not one RankScope keeps."""
    for column in ("key", "dataset", "system"):
        if not isinstance(row.get(column), str) or not row[column]:
            return f"its {column} is not text"
    if row.get("split") is not None and not isinstance(row["split"], str):
        return "its split is not text"
    if type(row.get("k")) is not int or row["k"] < 0:
        return f"its depth {row.get('k')!r:.40} is not a whole number"
    if not _number(row.get("created")) or not math.isfinite(row["created"]):
        return "its time is not a number"
    return _json_object(row.get("params"), "parameters")


_HEX = frozenset("0123456789abcdef")
KEPT_FILES = row_bounds.KEPT_FILES  # files one kept data set holds at most (an upload of a corpus, queries and qrels)


def _hash_text(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and set(value) <= _HEX


def kept_files(text: object) -> tuple[list[str], str | None]:
    """(the file names of a kept data set's row, None) or ([], why they are not what ``put_kept``
    writes: a JSON list of at most ``KEPT_FILES`` plain file names, ``safe_names.file_name_problem``)."""
    files, problem = loaded(text, "files")
    if problem is not None:
        return [], problem
    if not isinstance(files, list) or not 0 < len(files) <= KEPT_FILES:
        return [], f"its files are not a list of 1 to {KEPT_FILES} names"
    for name in files:
        problem = file_name_problem(name)
        if problem is not None:
            return [], f"a file's name {str(name)[:40]!r} {problem}"
    return files, None


def kept_problem(row: dict[str, Any]) -> str | None:
    """Why a row of the kept data sets (``Store.put_kept``'s) is not one RankScope keeps: its id and
    corpus not hashes, its maker or name not text, a count or a time not a number."""
    for column in ("id", "corpus"):
        if not _hash_text(row.get(column)):
            return f"its {column} is not a hash"
    for column in ("owner", "name"):
        if not isinstance(row.get(column), str):
            return f"its {column} is not text"
    for column in ("documents", "queries", "bytes"):
        if type(row.get(column)) is not int or row[column] < 0:
            return f"its {column} {row.get(column)!r:.40} is not a whole number"
    if row.get("published") not in (0, 1):
        return "whether it is published is not 0 or 1"
    for column in ("created", "opened"):
        if not _number(row.get(column)) or not math.isfinite(row[column]):
            return f"its {column} time is not a number"
    return None

