"""Every named API endpoint, sent what a stranger on a shared server would send: each text
parameter gets markup, a lone surrogate, a noncharacter, a bidi override, a NUL, a path, a
spreadsheet formula, a fullwidth lookalike and a megabyte of text; each number parameter gets
2^63, 10^30 and -1.

Whatever an endpoint does with it, the caller gets either its normal answer, with every HTML in it
inert, or one line saying what is wrong — never Gradio's generic "raised an exception" (an error
nothing caught), never a traceback; and afterwards the server still searches, and the store holds
no name or id the name boundary (``retrieval.safe_names``) refuses. The app runs for real (tiny
encoder, a real store) and is driven through ``gradio_client``.
"""
from __future__ import annotations

import sqlite3

import pytest

from retrieval.data.readers import load_dataset
from retrieval.safe_names import check_name, id_problem
from tests.conftest import DEMO, store_copy
from tests.security.test_hostile import assert_inert, shown, write

TEXTS = {
    "markup": '<img/src="http://evil.invalid/i.png"/onerror=alert(1)>',
    "lone surrogate": "ab\ud800",
    "noncharacter": "a\uffffb",
    "bidi override": "\u202eevil",
    "nul": "a\x00b",
    "path": "../../../etc/passwd",
    "formula": "=cmd|' /C calc'!A0",
    "lookalike": "ｄｅｎｓｅ",
    "megabyte": "x" * 1_000_000,
}
NUMBERS = {"2^63": 2**63, "1e30": 10**30, "negative": -1}


@pytest.fixture(scope="module")
def app_client(tiny_model_dir, tmp_path_factory, demo_sparse_store):
    import app as rankscope_app

    # the demo's SPLADE vectors stored already: no learned sparse build of the demo runs beside the calls
    store = store_copy(demo_sparse_store, tmp_path_factory.mktemp("hostile-api") / "store.sqlite3")
    demo, registry = rankscope_app.create(DEMO, model=str(tiny_model_dir), store_path=str(store))
    demo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True,
                        **rankscope_app.launch_kwargs(registry.store, max_upload="2mb"))
    yield demo.local_url, registry, store
    demo.close()


@pytest.fixture(scope="module")
def pair():
    ds = load_dataset(DEMO)
    return next((q, next(iter(docs))) for q, docs in ds.qrels["test"].items())


def call(url: str, endpoint: str, args) -> tuple[str, object]:
    """Call ``endpoint`` as any HTTP client can: JSON with ``ensure_ascii`` (so a lone surrogate
    travels as its ``\\ud800`` escape, which gradio_client's encoder cannot send), then read the
    event stream. ``("complete", data)`` or ``("error", message or None)``."""
    import json

    import requests

    r = requests.post(f"{url}gradio_api/call/{endpoint.lstrip('/')}", data=json.dumps({"data": list(args)}),
                      headers={"Content-Type": "application/json"}, timeout=120)
    if r.status_code != 200:
        return "error", f"HTTP {r.status_code}: {r.text[:300]}"
    stream = requests.get(f"{url}gradio_api/call/{endpoint.lstrip('/')}/{r.json()['event_id']}", timeout=300).text
    event, data = None, None
    for line in stream.splitlines():
        if line.startswith("event:"):
            event = line.split(":", 1)[1].strip()
        elif line.startswith("data:") and event in ("complete", "error"):
            data = json.loads(line.split(":", 1)[1])
    return event or "none", data




def answered(url: str, endpoint: str, args) -> object | None:
    """The endpoint's answer (None when it refused): a refusal must be one line saying what is
    wrong, never the generic error of an exception nothing caught (no message), never a traceback."""
    event, data = call(url, endpoint, args)
    assert event in ("complete", "error"), (event, data)
    if event == "error":
        message = shown(data.get("error") if isinstance(data, dict) else data)
        assert data and message != "None", "an exception nothing caught: the caller got no message"
        assert "Traceback" not in message and message.strip(), message[:300]
        if "is not in the list of choices" not in message:  # Gradio's own check quotes the value and the list
            assert len(message) < 2_000, f"the refusal echoes the input: {len(message):,} characters"
        return None
    for part in data:  # an HTML or Markdown output; a JSON output is data the page shows as JSON
        if isinstance(part, str):
            assert_inert(part)
    return data


# endpoint (and which parameter) -> its arguments with the payload in that parameter
def text_cases(q, d):
    return {
        "/search": lambda p: (p,),
        "/add_queries": lambda p: ([], p),
        "/judge_queue": lambda p: (p, 10, False, "auto", 50, 0, ""),
        "/judge judge": lambda p: (p, q, d, "1", 10, False, "auto", 50, 0, ""),
        "/judge query id": lambda p: ("ann", p, d, "1", 10, False, "auto", 50, 0, ""),
        "/judge document id": lambda p: ("ann", q, p, "1", 10, False, "auto", 50, 0, ""),
        "/judge grade": lambda p: ("ann", q, d, p, 10, False, "auto", 50, 0, ""),
        "/take_snapshot name": lambda p: (p, "", False),
        "/take_snapshot note": lambda p: ("hostile-note", p, False),
        "/replace_snapshot name": lambda p: (p, "", False),
        "/replace_snapshot note": lambda p: ("hostile-note", p, False),
        "/publish_snapshot": lambda p: (p,),
        "/publish_query_set": lambda p: (p,),
        "/publish_judge": lambda p: (p,),
        "/training_status": lambda p: (p,),
        "/mark_baseline": lambda p: (p,),
        "/remove_query_set": lambda p: (p,),
        "/use_encoder": lambda p: (p,),
        "/compare_runs": lambda p: (p, p, "ndcg@10"),
        "/snapshot_diff": lambda p: (p, p, p, "ndcg@10"),
        "/project query": lambda p: ("test", 5, p, ""),
        "/failures tuned": lambda p: ("test", p),
        "/evaluate split": lambda p: (p, []),
        "/evaluate extras": lambda p: ("test", [p]),
        "/compression": lambda p: (p,),
        "/segments": lambda p: (p,),
        "/export_failures": lambda p: ("test", p),
        "/export_qrels": lambda p: (p, False, "median"),
        "/export_qrels rule": lambda p: ("trec", True, p),
        "/snapshots": lambda p: (p,),
        "/use_judgments": lambda p: (p,),
        "/reopen_dataset": lambda p: (p,),
        "/forget_dataset": lambda p: (p,),
        "/train loss": lambda p: (p, "bm25", 1, 8, 1e-5, 64, 2, 0.1, 0.3, 0.01, "cpu", 0.8, "", "mean", 4, 1, 0.0,
                                  False, "hybrid", "dense"),
        "/train device": lambda p: ("triplet", "bm25", 1, 8, 1e-5, 64, 2, 0.1, 0.3, 0.01, p, 0.8, "", "mean", 4, 1,
                                    0.0, False, "hybrid", "dense"),
        "/train_on_judged device": lambda p: ("triplet", "bm25", 1, 8, 1e-5, 64, 2, 0.1, 0.3, 0.01, p, 0.8, "", "mean",
                                              4, 1, 0.0, False, "hybrid", "dense"),
        "/train teacher": lambda p: ("marginmse", "bm25", 1, 8, 1e-5, 64, 2, 0.1, 0.3, 0.01, "cpu", 0.8, "", "mean",
                                     4, 1, 0.0, False, p, "dense"),
        "/train family": lambda p: ("inbatch", "bm25", 1, 8, 1e-5, 64, 2, 0.1, 0.3, 0.01, "cpu", 0.8, "", "mean",
                                    4, 1, 0.0, False, "hybrid", p),
        "/expansion": lambda p: (p, ""),
        "/expansion model": lambda p: ("cold", p),
        "/query_difficulty": lambda p: (p,),
    }


TEXT_CASES = [(e, k) for e in text_cases("q", "d") for k in TEXTS]


@pytest.mark.parametrize("endpoint,kind", TEXT_CASES, ids=[f"{e}-{k}" for e, k in TEXT_CASES])
@pytest.mark.server
@pytest.mark.slow
def test_every_text_parameter_takes_hostile_text(endpoint, kind, app_client, pair):
    args = text_cases(*pair)[endpoint](TEXTS[kind])
    answered(app_client[0], endpoint.split()[0], args)


def number_cases():
    return {
        "/judge_queue seed": lambda n: ("ann", 10, False, "random", 5, n, ""),
        "/judge_queue size": lambda n: ("ann", 10, False, "random", n, 0, ""),
        "/judge_queue predicted size": lambda n: ("ann", 10, False, "predicted", n, 0, ""),
        "/judge_queue depth": lambda n: ("ann", n, False, "auto", 50, 0, ""),
        "/settled seed": lambda n: (10, "random", 5, n, ""),
        "/settled size": lambda n: (10, "random", n, 0, ""),
        "/settled depth": lambda n: (n, "auto", 50, 0, ""),
        "/project": lambda n: ("test", n, "", ""),
    }


NUMBER_CASES = [(e, k) for e in number_cases() for k in NUMBERS]


@pytest.mark.parametrize("endpoint,kind", NUMBER_CASES, ids=[f"{e}-{k}" for e, k in NUMBER_CASES])
@pytest.mark.server
@pytest.mark.slow
def test_every_number_parameter_takes_numbers_at_the_edge(endpoint, kind, app_client):
    args = number_cases()[endpoint](NUMBERS[kind])
    answered(app_client[0], endpoint.split()[0], args)


@pytest.mark.parametrize("kind", sorted(TEXTS))
@pytest.mark.server
@pytest.mark.slow
def test_uploads_named_by_hostile_text(kind, app_client, pair, tmp_path):
    """A run and a judgments file, each named (run name, judge) by the payload."""
    import requests

    url, q, d = app_client[0], *pair
    run = write(tmp_path / "run.trec", f"{q} Q0 {d} 1 1.0 plain\n")
    grades = write(tmp_path / "grades.csv", f"query_id,doc_id,grade\n{q},{d},1\n")
    for endpoint, path in (("/import_run", run), ("/import_judgments", grades)):
        with path.open("rb") as f:
            uploaded = requests.post(f"{url}gradio_api/upload", files={"files": f}, timeout=60).json()[0]
        answered(url, endpoint, ({"path": uploaded, "meta": {"_type": "gradio.FileData"}}, TEXTS[kind]))


@pytest.mark.parametrize("endpoint", ["/agreement", "/runs", "/cancel_training", "/resume_training", "/load_demo"])
@pytest.mark.server
@pytest.mark.slow
def test_endpoints_without_parameters_answer_any_session(endpoint, app_client):
    """Called bare by a session that did nothing before: an answer, or one line."""
    answered(app_client[0], endpoint, ())


@pytest.mark.parametrize("kind", ["markup", "path", "bidi override", "formula"])
@pytest.mark.server
@pytest.mark.slow
def test_an_upload_named_by_hostile_text_loads_or_is_refused_in_one_line(kind, app_client, tmp_path):
    """The file's own name (which the status quotes) carries the payload."""
    import requests

    url = app_client[0]
    name = TEXTS[kind].replace("/", "_") + ".jsonl"
    corpus = write(tmp_path / name, '{"_id": "d1", "text": "a cat"}\n{"_id": "d2", "text": "a dog"}\n')
    with corpus.open("rb") as f:
        uploaded = requests.post(f"{url}gradio_api/upload", files={"files": (name, f)}, timeout=60).json()[0]
    answered(url, "/load_dataset", ([{"path": uploaded, "meta": {"_type": "gradio.FileData"}}],))
    answered(url, "/load_demo", ())


@pytest.mark.server
@pytest.mark.slow
def test_afterwards_the_server_searches_and_the_store_holds_only_valid_names(app_client):
    """Run last in this module: whatever was sent above, the server answers and nothing the name
    boundary refuses reached the store (judges, snapshots, query-set names, ids)."""
    url, registry, store = app_client
    _, result = answered(url, "/search", ("leaky faucet washer",))
    assert result["systems"]["bm25"]
    con = sqlite3.connect(store)
    try:
        for judge, qid, doc in con.execute("select judge, query_id, doc_id from judgments"):
            check_name(judge, "judge")
            assert id_problem(qid) is None and id_problem(doc) is None
        for (name,) in con.execute("select name from snapshots"):
            check_name(name, "snapshot name")
        for (name,) in con.execute("select name from query_sets"):
            check_name(name, "query set name")
        for (judge,) in con.execute("select judge from judges"):  # no name claimed that no grade could use
            check_name(judge, "judge")
    finally:
        con.close()


def test_the_door_keeps_each_kind_of_handler_and_its_signature():
    """``ui.boundary.guarded`` refuses a lone surrogate at any depth and otherwise calls the handler
    as it is: a plain function, a generator, a coroutine; its signature is the handler's."""
    import asyncio
    import inspect

    import gradio as gr

    from ui.boundary import guarded

    def plain(text: str, request: gr.Request = None):
        return text.upper()

    def gen(text: str):
        yield text
        yield text * 2

    async def coro(text: str):
        return text[::-1]

    assert guarded(plain)("ab") == "AB" and list(guarded(gen)("ab")) == ["ab", "abab"]
    assert asyncio.run(guarded(coro)("ab")) == "ba"
    once = guarded(plain)
    assert inspect.signature(once) == inspect.signature(plain) and guarded(once) is once
    assert inspect.isgeneratorfunction(guarded(gen)) and inspect.iscoroutinefunction(guarded(coro))
    for value in ("x\udfff", ["ok", ["deep\ud800"]], {"k": ("\ud83d",)}):
        with pytest.raises(gr.Error, match=r"U\+D[89A-F][0-9A-F]{2} \(a lone surrogate\)"):
            guarded(plain)(value)
        with pytest.raises(gr.Error):
            list(guarded(gen)(value))
    assert guarded(plain)("naïve 😀") == "NAÏVE 😀"
