"""Judging at the scale of a query log: how long the first judging queue takes to be ready, one
judgment's round trip (the grade stored, the next pair back) through the API and in a browser, and
whether another user's searches slow down meanwhile.

    python bench/judge_speed.py [--queries 50000] [--judgments 60] [--depth 10] [--pace 0.5]
        [--model ID_OR_FOLDER]

Writes the bundled demo's corpus with ``--queries`` queries (the demo's own, then seeded log-like
queries of 1–6 words drawn from the corpus's vocabulary, each with a Zipf-distributed ``count``
column) to a temporary folder, opens the app in-process on it (the default encoder unless
``--model``, a fresh store), waits for its background builds (the corpus's dense and learned sparse
vectors: the server is idle when the timing starts) and, calling the endpoints as the browser's
client does (:class:`Streamed`: one POST to the queue, the event stream read as it arrives):

1. times ``--searches`` searches (``/search``) on an idle server: the baseline;
2. times the first ``/judge_queue`` — with more than 1,000 queries the default judges a random
   sample of 200 (``retrieval.judging.sampling``), pooled by every system on show;
3. grades ``--judgments`` pairs one after another through ``/judge``, the judge alone on the server,
   then as many through ``gradio_client`` (whose reader polls what it read every 50 ms: a floor of
   that client's, not the app's);
4. grades ``--judgments`` more, one every ``--pace`` seconds (a judge reads the passage first),
   while a second client keeps searching back to back, timing every judgment and every search;
5. grades ``--judgments`` more in a headless Chromium on the app's page (the Judge tab, one grade
   button clicked every ``--pace`` seconds; click to the progress line's new count, timed in the
   page), where Playwright and Chromium are installed.

Beside them, in the same run: the same judging work in-process, and Gradio's own floor — an app
with an endpoint that returns its input and a judging panel with no work behind it, timed the same
three ways (streamed, ``gradio_client``, in the browser), and in the browser once more in a page
whose load event outputs as many components as the app's does (:func:`page_load_outputs`: Gradio's
page re-reads each of them whenever any event starts or ends, so a page's size sets its floor).

Prints p50 / p95 / max of each; the comparable figures are the searches' p95 on the idle server and
the judgments' p95 alone, each beside its floor, measured in the same run. Last line: ``queue_s=…
judge_p95_ms=… [browser_p95_ms=…] search_p95_ms=…`` (a judgment alone through the API and in the
browser; searches while judging).
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from _common import DEMO, ROOT, json_arg, percentile_ms, recorded  # first: it puts the checkout on sys.path


def log_folder(n_queries: int, seed: int = 0) -> Path:
    """The demo corpus and labels with ``n_queries`` queries (its own first), as a BEIR folder."""
    folder = Path(tempfile.mkdtemp(prefix="rankscope-judge-log-"))
    (folder / "corpus.jsonl").write_text((DEMO / "corpus.jsonl").read_text())
    (folder / "qrels").mkdir()
    for split in (DEMO / "qrels").iterdir():
        (folder / "qrels" / split.name).write_text(split.read_text())
    own = [json.loads(line) for line in (DEMO / "queries.jsonl").read_text().splitlines() if line.strip()]
    words = sorted({w.lower().strip(".,;:!?()\"'") for line in (DEMO / "corpus.jsonl").read_text().splitlines()
                    for w in json.loads(line)["text"].split() if w.isalpha() and len(w) > 3})
    rng = random.Random(seed)
    rows = [{"_id": q["_id"], "text": q["text"], "count": 1} for q in own]
    texts = {q["text"] for q in own}
    while len(rows) < n_queries:
        text = " ".join(rng.sample(words, rng.randint(1, 6)))
        if text not in texts:
            texts.add(text)
            rows.append({"_id": f"log-{len(rows)}", "text": text, "count": max(1, int(1000 / rng.paretovariate(1.1)))})
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return folder


class Streamed:
    """A Gradio app's endpoints called as its page's own client calls them: ``POST
    …/gradio_api/queue/join`` with the inputs, then ``GET …/gradio_api/queue/data`` read line by line
    as the server streams it, up to the event's ``process_completed``. (``gradio_client`` reads the
    same stream in a thread and polls what it read every 50 ms: up to 50 ms per message on top of the
    server's time, which a user's browser never waits.) The endpoints' indices, defaults and state
    slots come from ``gradio_client``'s reading of the app's config, the outputs are its
    ``process_predictions``: the same values ``Client.predict`` returns. One session per instance."""

    def __init__(self, url: str):
        import httpx
        from gradio_client import Client

        self.root, self.config = url.rstrip("/"), Client(url, verbose=False)
        self.http, self.session = httpx.Client(timeout=600), uuid.uuid4().hex

    def predict(self, *data, api_name: str) -> tuple:
        from gradio_client import utils

        fn_index = self.config._infer_fn_index(api_name, None)
        endpoint = self.config.endpoints[fn_index]  # its defaults filled in and its state slots, as gradio_client does
        inputs = list(endpoint.insert_empty_state(*utils.construct_args(endpoint.parameters_info, data, {})))
        joined = self.http.post(f"{self.root}/gradio_api/queue/join",
                                json={"data": inputs, "fn_index": fn_index, "trigger_id": None,
                                      "event_data": None, "session_hash": self.session})
        joined.raise_for_status()
        event = joined.json()["event_id"]
        with self.http.stream("GET", f"{self.root}/gradio_api/queue/data",
                              params={"session_hash": self.session}) as stream:
            stream.raise_for_status()
            for line in stream.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[len("data:"):])
                if message.get("event_id") == event and message.get("msg") == "process_completed":
                    if not message.get("success", False):
                        raise RuntimeError(f"{api_name} failed: {message.get('output')}")
                    return tuple(endpoint.process_predictions(*message["output"]["data"]))
        raise RuntimeError(f"{api_name}: the stream closed before the event completed")

    def close(self) -> None:
        self.http.close()


GRADE_IN_PAGE = """async (grade) => {
  const progress = document.getElementById('judge-progress');
  const judged = (text) => Number((text.match(/Judged ([0-9,]+) of/) || [0, '-1'])[1].replace(/,/g, ''));
  const before = judged(progress.innerText);
  return await new Promise((resolve) => {
    const started = performance.now();
    const seen = new MutationObserver(() => {
      if (judged(progress.innerText) === before + 1) { seen.disconnect(); resolve(performance.now() - started); }
    });
    seen.observe(progress, {subtree: true, childList: true, characterData: true});
    document.getElementById('judge-' + grade).click();
  });
}"""


def page_load_outputs(app) -> int:
    """How many components ``app``'s page-load events output: Gradio's page re-reads every component
    that has been an event's output each time any event starts or ends, so they weigh on every
    later round trip in the browser."""
    config = app.get_config_file()
    return len({o for d in config["dependencies"] if any(t[1] == "load" for t in d["targets"]) for o in d["outputs"]})


def launch_echo(touched: int = 0):
    """Gradio's floor on this machine: an app whose endpoint ``/echo`` returns its input, and the
    judging panel's shape with no work behind it — a progress line ``#judge-progress`` that grade
    buttons ``#judge-0`` … ``#judge-2`` advance, beside a passage's HTML and the pair's JSON; with
    ``touched`` more components (in another tab) that the page's load event outputs (each left as it
    is), as a page that refreshes its views on load has."""
    import gradio as gr

    passage = " ".join(f"<mark>word{i}</mark>" if i % 7 == 0 else f"word{i}" for i in range(300))

    def advance(n):
        return (f"**Judged {n + 1} of 1,000 pooled pairs**", f"<div><h3>Passage {n}</h3><p>{passage}</p></div>",
                {"query_id": "q", "doc_id": f"d{n}", "position": n}, n + 1)

    with gr.Blocks() as echo:
        box, out = gr.Textbox(), gr.Textbox()
        gr.Button().click(lambda x: x, box, out, api_name="echo")
        progress, pair = gr.Markdown("**Judged 0 of 1,000 pooled pairs**", elem_id="judge-progress"), gr.HTML()
        shown, count = gr.JSON(visible=False), gr.State(0)
        buttons = [gr.Button(str(g), elem_id=f"judge-{g}") for g in range(3)]
        gr.on([b.click for b in buttons], advance, count, [progress, pair, shown, count], trigger_mode="once")
        if touched:
            with gr.Tabs(), gr.Tab("views"):
                views = [gr.Markdown() for _ in range(touched)]
            echo.load(lambda: tuple(gr.skip() for _ in views), None, views)
    echo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True)
    return echo


def echo_round_trip_ms(url: str, n: int = 30) -> tuple[list[float], list[float]]:
    """Round trips to ``/echo`` (as the browser's client calls it, through ``gradio_client``), alternated."""
    from gradio_client import Client

    streamed, client = Streamed(url), Client(url, verbose=False)
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(n):
        for caller, out in ((streamed, times[0]), (client, times[1])):  # alternated: the same machine state
            t = time.perf_counter()
            caller.predict("ping", api_name="/echo")
            out.append(1000 * (time.perf_counter() - t))
    streamed.close()
    return times


def browser_ms(url: str, n: int, pace_s: float, judge: tuple[str, int] | None = None) -> list[float] | str:
    """A grade's round trip as its judge sees it: in a headless Chromium on the app's page, the
    time from the grade button's click to the progress line counting it (the next pair arrives in
    the same update), measured in the page (``performance.now()``, a ``MutationObserver``), one grade
    every ``pace_s`` seconds (a judge reads the passage first). ``judge``: (name, pool depth) to start
    judging with in the Judge tab first; None: the page is already a judging panel (the echo). The
    reason instead where Playwright or Chromium is missing."""
    import shutil

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "Playwright is not installed (pip install playwright)"
    chromium = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return "Chromium is not installed (apt install chromium, or CHROMIUM_PATH)"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(120_000)
            page.goto(url)
            if judge is not None:
                page.get_by_role("tab", name="Judge").click()
                page.locator("#judge-name textarea").fill(judge[0])
                page.get_by_label("Pool depth (each system's top k)").fill(str(judge[1]))
                page.locator("#judge-start").click()
            page.locator("#judge-progress").get_by_text("Judged 0 of").wait_for()

            def grade(value: int) -> float:
                # the button is on the page first (on a busy machine the panel's pair can come after its
                # progress line): a round trip is timed from the click, not from the page's readiness
                page.locator(f"#judge-{value}").wait_for(state="attached")
                return float(page.evaluate(GRADE_IN_PAGE, value))
            grade(0)  # the first grade warms the page's own code: not counted
            times = []
            for i in range(n):
                page.wait_for_timeout(1000 * pace_s)
                times.append(grade(i % 3))
            return times
        finally:
            browser.close()


def in_process_ms(folder: Path, store: Path, n: int, depth: int, model: str | None) -> list[float]:
    """The judgment's own work without the web round trip: ``ui.judge.grade_pair`` (the grade stored
    and noted in the queue) and ``show`` (the next pair's HTML), on the same data and store."""
    from retrieval import Store, load_dataset
    from ui import judge
    from ui.registry import Registry

    registry = Registry(Store(store), model, foreground_s=600)
    ws = registry.get(registry.open(load_dataset(folder), budgeted=False))
    q = judge.judging_queue(ws, registry.store, "in-process", depth, fresh=True)
    position, times = q.next_unjudged(), []
    for i in range(n):
        if position is None:
            break
        qid, doc = q.pairs[position]
        t = time.perf_counter()
        q, position = judge.grade_pair(ws, registry.store, "in-process", qid, doc, i % 3, depth)
        judge.show(ws, q, position)
        times.append(1000 * (time.perf_counter() - t))
    return times


def summary(name: str, ms: list[float]) -> str:
    return f"{name:<36}{statistics.median(ms):>10.1f}{percentile_ms([x / 1000 for x in ms], 95):>10.1f}{max(ms):>10.1f}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--queries", type=int, default=50_000)
    p.add_argument("--judgments", type=int, default=60)
    p.add_argument("--searches", type=int, default=40, help="searches on the idle server (the baseline)")
    p.add_argument("--depth", type=int, default=10)
    p.add_argument("--model", default=None)
    p.add_argument("--pace", type=float, default=0.5,
                   help="seconds between two grades beside another user's searches and in the browser")
    p.add_argument("--store", default=None,
                   help="the app's store file (default: a new one, removed at the end); one that holds the demo's "
                   "vectors already spares the background encoding before the timings")
    json_arg(p)
    args = p.parse_args(argv)
    if args.queries < 1 or args.judgments < 1 or args.searches < 1 or args.pace < 0:
        p.error("--queries, --judgments and --searches must be positive, --pace at least 0")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.path[:] = [q for q in sys.path if Path(q or ".").resolve() != Path(__file__).resolve().parent]
    sys.path.insert(0, str(ROOT))
    from gradio_client import Client

    import app as rankscope

    folder = log_folder(args.queries)
    atexit.register(shutil.rmtree, folder, True)  # the bench's own data: gone when it ends, as it ends
    if args.store:
        store = Path(args.store)
    else:
        store = Path(tempfile.mkdtemp(prefix="rankscope-judge-")) / "store.sqlite3"
        atexit.register(shutil.rmtree, store.parent, True)  # its own store too, never one it was given
    started = time.perf_counter()
    demo, _ = rankscope.create(str(folder), args.model, str(store))
    demo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True)
    print(f"{args.queries:,} queries over the demo's documents; app ready in {time.perf_counter() - started:.1f} s",
          file=sys.stderr)
    from retrieval.index.background_build import running

    while builds := running():  # the corpus's vectors (dense, learned sparse) encoded first: the server idle when timed
        for build in builds:  # one build may start the next: asked again until none runs
            build.wait(3600)
    print(f"background builds done {time.perf_counter() - started:.1f} s after the start", file=sys.stderr)
    judge, searcher = Streamed(demo.local_url), Streamed(demo.local_url)
    searches = ["descale a kettle", "winter tyres", "sourdough starter", "leaky faucet washer", "budget travel"]

    idle = []
    for n in range(args.searches):
        t = time.perf_counter()
        searcher.predict(searches[n % len(searches)], api_name="/search")
        idle.append(1000 * (time.perf_counter() - t))

    t = time.perf_counter()
    progress, _, shown = judge.predict("bench", args.depth, False, api_name="/judge_queue")
    queue_s = time.perf_counter() - t

    def grade(caller, n: int) -> float:
        nonlocal shown
        t0 = time.perf_counter()
        _, _, shown = caller.predict("bench", shown["query_id"], shown["doc_id"], n % 3, args.depth, False,
                                     api_name="/judge")
        return 1000 * (time.perf_counter() - t0)

    alone = [grade(judge, n) for n in range(args.judgments)]  # one judge on the server
    polled = Client(demo.local_url, verbose=False)  # the same grades through gradio_client, for comparison
    through_client = [grade(polled, 2 * args.judgments + n) for n in range(args.judgments)]
    busy, done = [], threading.Event()

    def keep_searching():
        n = 0
        while not done.is_set():
            t0 = time.perf_counter()
            searcher.predict(searches[n % len(searches)], api_name="/search")
            busy.append(1000 * (time.perf_counter() - t0))
            n += 1

    thread = threading.Thread(target=keep_searching)
    thread.start()
    try:
        judged = []
        for n in range(args.judgments):  # while another user searches, at a judge's pace
            time.sleep(args.pace)
            judged.append(grade(judge, args.judgments + n))
    finally:
        done.set()
        thread.join()
        judge.close()
        searcher.close()
    try:
        in_browser = browser_ms(demo.local_url, args.judgments, args.pace, ("browser", args.depth))
    finally:
        demo.close()
    echo = launch_echo()
    try:
        floor, floor_client = echo_round_trip_ms(echo.local_url)
        floor_browser = browser_ms(echo.local_url, args.judgments, args.pace)
    finally:
        echo.close()
    touched = page_load_outputs(demo)
    echo = launch_echo(touched)  # the same panel in a page as heavy as the app's
    try:
        floor_page = browser_ms(echo.local_url, args.judgments, args.pace)
    finally:
        echo.close()
    own = in_process_ms(folder, store, args.judgments, args.depth, args.model)
    print(f"first queue: {queue_s:.2f} s — {progress.split('**')[1] if '**' in progress else progress}")
    print(f"{'':<36}{'p50 ms':>10}{'p95 ms':>10}{'max ms':>10}")
    print(summary("Gradio echo (the floor)", floor))
    print(summary("judgment, in-process", own))
    print(summary("search, idle server", idle))
    print(summary("judgment, alone", alone))
    print(summary("judgment, beside searches", judged))
    print(summary("search, while judging", busy))
    print(summary("Gradio echo, gradio_client", floor_client))
    print(summary("judgment, alone, gradio_client", through_client))
    if isinstance(in_browser, str) or isinstance(floor_browser, str) or isinstance(floor_page, str):
        print(f"in the browser: not measured — {in_browser if isinstance(in_browser, str) else floor_browser}")
    else:
        print(summary("Gradio echo, in the browser", floor_browser))
        print(summary(f"  … {touched} outputs of page load", floor_page))
        print(summary("judgment, alone, in the browser", in_browser))
    p95 = {name: percentile_ms([x / 1000 for x in xs], 95) for name, xs in (("idle", idle), ("busy", busy),
                                                                             ("alone", alone), ("judge", judged))}
    print(f"searches while judging: p95 {p95['busy'] / p95['idle']:.2f} × the idle server's; a judgment beside "
          f"them: p95 {p95['judge'] / p95['alone']:.2f} × alone")
    browser = ("" if isinstance(in_browser, str)
               else f" browser_p95_ms={percentile_ms([x / 1000 for x in in_browser], 95):.1f}")
    print(f"queue_s={queue_s:.2f} judge_p95_ms={p95['alone']:.1f}{browser} search_p95_ms={p95['busy']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
