"""The Train view: fine-tune the dense encoder in a background job (loss, negatives, schedule,
device), watch its progress and loss curve, cancel it, and read base against fine-tuned."""
from __future__ import annotations

import functools
import re
import time
import uuid

import gradio as gr

from retrieval import Workspace, numbers
from retrieval.evaluation.metrics import SUMMARY_METRICS
from retrieval.judging.labels import JUDGED, judged_counts
from retrieval.safe_names import shown
from retrieval.systems import SPLADE, label
from training.finetune import noted_stages
from training.job import FINAL, STOPPING, JobQueue, JobSpec
from training.losses import DENSE_ONLY, FAMILIES, LOSSES, SPARSE_LOSSES, SPARSE_NEGATIVES, TEACHERS
from training.pairs import PRETRAIN_TASKS, check_links, needs_links
from training.trainer import QUERY_POOLINGS, TrainConfig
from ui import texts
from ui.common import require_dense
from ui.notify import Refusals, refuse
from ui.pools import LIGHT
from ui.present.escape import code, text
from ui.present.figures import loss_figure
from ui.present.tables import (
    per_query_change_caption,
    per_query_change_headers,
    per_query_change_rows,
    training_result_rows,
)
from ui.registry import Context, Registry, session_of
from ui.tables import table

RESULT_HEADERS = ["model", "system", "nDCG@10", "Recall@100", "MRR@10"]
PER_QUERY_HEADERS = per_query_change_headers({})  # a dense encoder's; a finished job's own once it ends
DEVICES = ["auto", "cpu", "cuda", "mps"]


def start(registry: Registry, jobs: JobQueue, ws: Workspace, values: dict, cold_start: float,
          on: str | None = None, session: str = "", address: str = "") -> str:
    """Queue a training job on ``ws``'s data set from the form's ``values`` (``TrainConfig`` field
    names; blanks take the defaults); returns the job id. ``cold_start`` is the training fraction
    of a seeded split by query, used only when the data set has no train split, or when ``on``
    names the split to train on (the judged queries: ``JUDGED``), which is then cut by query into a
    part that trains and a part base and trained are evaluated on. The job is ``session``'s maker's
    (``Registry.viewer``: its browser's; ``training.job.mine``), from client ``address``; what the
    queue's own records say it takes more of (``training.job.JobLimits``: one job of a maker's
    queued or running, a shared deployment's per address, the waiting ones in all), or more work
    than one job may ask for (``training.finetune.check_work``), is refused in one line: one client
    cannot hold everyone else's training back. The job loads the base encoder at the precision ``ws``'s
    encoder has, so the corpus vectors its dense index was built from are the ones the job reads (the
    store keys them by a fingerprint that covers the precision)."""
    try:
        cfg = TrainConfig.from_mapping(values)
        cold_start = numbers.number(cold_start, "the cold-start train fraction")
        if not 0.05 <= cold_start <= 0.95:
            raise ValueError(f"the cold-start train fraction is between 0.05 and 0.95, not {cold_start!r}")
    except (TypeError, ValueError, OverflowError) as err:
        raise refuse(err) from err
    require_dense(ws)  # else the job would encode the same corpus a second time
    if cfg.family == "sparse" and ws.pending((SPLADE,)):
        raise refuse("the learned sparse index of this data set is still being built: train the sparse model when "
                     "it is done (else the job would encode the same corpus a second time)")
    if on is not None:
        _require_queries_to_train_on(ws, on, cold_start)
    elif ws.dataset.default_split() is None and not cfg.pretrain:
        raise refuse("this data set has no relevance labels: choose a first stage on pseudo pairs (ICT, BFS or, "
                     "where its documents link to each other, WLP)")
    try:
        check_links(ws.dataset, cfg.pretrain)
    except ValueError as err:
        raise refuse(err) from err
    has_train = "train" in ws.dataset.qrels and ws.dataset.default_split() != "train"
    out = registry.store.models_dir / f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"  # two at once differ
    base = ws.sparse_model if cfg.family == "sparse" else ws.model_name  # the model of the family trained
    try:
        return jobs.submit(JobSpec(ws.dataset, cfg, str(out), base_model=base, eval_split=on,
                                   cold_start=None if has_train and on is None else cold_start,
                                   encoder=ws.model_name if cfg.family == "sparse" else None,
                                   owner=registry.viewer(session).owner, precision=_precision(ws)), address)
    except ValueError as err:  # the work it asks for, or the queue's bounds
        raise refuse(err) from err


def _precision(ws: Workspace) -> str | None:
    """The precision ``ws``'s dense encoder runs at, when it is loaded (None: the job's own "auto")."""
    encoder = ws.loaded_encoder
    return encoder.precision if encoder is not None else None


def address_of(request: gr.Request | None) -> str:
    """The client address a request came from ("" outside a request, e.g. in tests): the peer, or
    behind a reverse proxy the address the proxy forwards where the server trusts it (uvicorn's
    ``FORWARDED_ALLOW_IPS``, 127.0.0.1 by default); else every client is the proxy's address."""
    client = getattr(request, "client", None)
    return str(getattr(client, "host", None) or "")


def _require_queries_to_train_on(ws: Workspace, split: str, fraction: float) -> None:
    """Refuse, in one line, a split that cannot be cut into queries to train on and queries to
    evaluate on (each part needs ``MIN_SPLIT_QUERIES`` queries with a relevant document)."""
    labels = ws.dataset.qrels.get(split, {})
    relevant = judged_counts(labels).relevant
    if not relevant:
        raise refuse("no judged queries with a relevant document yet: judge some on the Judge tab and use them, "
                     "then train on them")
    smaller = min(round(relevant * fraction), relevant - round(relevant * fraction))
    if smaller < MIN_SPLIT_QUERIES:
        raise refuse(f"{relevant} judged {'query has' if relevant == 1 else 'queries have'} a relevant document: "
                     f"cut {fraction:.0%} / {1 - fraction:.0%} to train and to evaluate, a part would hold fewer than "
                     f"{MIN_SPLIT_QUERIES}; judge more queries")


MIN_SPLIT_QUERIES = 5  # queries with a relevant document in each part of a judged split cut to train and evaluate


def resume(registry: Registry, jobs: JobQueue, ws: Workspace, session: str = "", address: str = "") -> str:
    """Queue the newest stopped job of ``session``'s (``training.job.mine``) on ``ws``'s data set again,
    to go on from its checkpoints; its id. Refused as ``start`` refuses (the queue's bounds count it
    as a new job of ``session``'s maker, from ``address``)."""
    viewer = registry.viewer(session)
    stopping = jobs.stopping(ws.dataset, viewer)
    if stopping:  # its cancel asked, its run not over: resuming another, older one now is not what was meant
        raise refuse(f"job {stopping[0]} is still stopping after its cancel: resume it once it says cancelled")
    stopped = jobs.resumable(ws.dataset, viewer)
    if not stopped:
        raise refuse("no cancelled, failed or interrupted training of yours on this data set left a checkpoint to "
                     "go on from")
    try:
        return jobs.resume(stopped[0]["id"], ws.dataset, viewer, address)
    except ValueError as err:
        raise refuse(err) from err


def job_markdown(job: dict) -> str:
    """The job's state in one line: progress with loss, rate and ETA while it runs; the error, the
    cancel reason or where the model was saved when it ended."""
    p = job.get("progress") or {}
    head = f"**Job `{job['id']}` — {job['status']}** on {text(job.get('device') or '…')}"
    if job["status"] == "running" and p:
        loss = p.get("loss")
        if isinstance(loss, float) and loss == loss:  # a training step
            head += (f" · {text(p.get('stage'))}: step {p.get('step')}/{p.get('total')}, loss {loss:.4f}, "
                     f"{p.get('examples_per_s', 0):.1f} examples/s, ETA {p.get('eta_s') or 0:.0f} s")
        else:  # mining hard negatives or evaluating: no loss, a share of the work done
            head += f" · {text(p.get('stage'))} ({(p.get('step') or 0) / max(p.get('total') or 1, 1):.0%})"
    if job["status"] == "failed":
        head += f"\n\n<pre>{text((job.get('error') or '')[-2000:])}</pre>"
    if job["status"] == STOPPING:  # never "running" again once its cancel was asked
        head += (f" · stopping at its next batch; it was at {text(p.get('stage') or 'its start')}"
                 if p else " · stopping at its next batch")
    if job["status"] == "cancelled":
        head += f" — {text(job.get('error') or '')}"
    if job["status"] == "done":
        r = job.get("result") or {}
        head += (f" · {text(r.get('plan_note', ''))}; {r.get('seconds', 0):.0f} s of training; saved to "
                 f"{code(job.get('model_path'))}")
        head += "".join(f"\n\n{text(line)}" for line in noted_stages(r.get("stages") or []))
        verdict = r.get("verdict") or next((line for line in r.get("stages") or []  # jobs stored before the field
                                            if line.startswith(("held-out selection", "no held-out check"))), "")
        if verdict:
            head += f"\n\n{text(verdict)}"
    return head


def poll(jobs: JobQueue, job_id: str, queries: dict[str, str]):
    """Status line, loss curve, and (once the job ended) the result table, the per-query table's
    caption and its rows; the last value says whether to keep polling."""
    job = jobs.status(job_id)
    if job is None:
        raise refuse(f"no training job {job_id[:80]!r}: start one, or resume yours")
    done = job["status"] in FINAL
    result = job.get("result") or {}
    return (job_markdown(job), loss_figure(job.get("losses") or []),
            training_result_rows(result, SUMMARY_METRICS) if done else gr.skip(),
            per_query_change_caption(result) if done else gr.skip(),
            {"headers": per_query_change_headers(result), "data": per_query_change_rows(result, queries)}
            if done else gr.skip(), not done)


JOB_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}")  # what ``JobQueue.submit`` names a job: 20260101-120000-a1b2c3


def job_status(jobs: JobQueue, job_id: object) -> dict:
    """The job ``job_id`` names (``/training_status``); an id that is not a job's (the wrong shape,
    or no such job) is refused in one line that quotes at most ``safe_names.SHOWN_CHARS`` of it."""
    if not isinstance(job_id, str) or not JOB_ID.fullmatch(job_id.strip()):
        shown_id = shown(job_id) if isinstance(job_id, str) else type(job_id).__name__
        raise refuse(f"{shown_id} is not a training job's id (they read like 20260101-120000-a1b2c3)")
    job = jobs.status(job_id.strip())
    if job is None:
        raise refuse(f"no training job {job_id.strip()!r}")
    return job


def cancel(registry: Registry, jobs: JobQueue, job_id: str, session: str = "") -> str:
    if job_id and jobs.cancel(job_id, registry.viewer(session)):
        return f"Cancelling `{job_id}`: it stops at its next batch …"
    return "No running job to cancel."


def pretrain_choices(ws: Workspace) -> tuple[list[tuple[str, str]], str]:
    """The first stages on pseudo pairs ``ws``'s data set can train (those with WLP only where its
    documents link to each other, each saying how many pairs its links make at most), and the line
    under the list that says so."""
    links = ws.dataset.link_count
    kinds = [k for k in ("", *PRETRAIN_TASKS) if links or not needs_links(k)]
    choices = [(texts.PRETRAIN_HELP[k] + (texts.WLP_PAIRS.format(links=links) if needs_links(k) else ""), k)
               for k in kinds]
    return choices, texts.PRETRAIN_INFO_LINKED.format(links=links) if links else texts.PRETRAIN_INFO_UNLINKED


def build(ctx: Context, tab: gr.Tab) -> None:
    d = TrainConfig()
    gr.Markdown(texts.TRAIN_HELP)
    with gr.Row():
        family = gr.Dropdown([(texts.FAMILY_HELP[f], f) for f in FAMILIES], value=d.family, label="Model to train",
                             elem_id="train-family", scale=2)
        loss = gr.Dropdown(choices=[(texts.LOSS_HELP[name], name) for name in LOSSES], value=d.loss, label="Loss",
                           scale=2)
        negatives = gr.Dropdown(choices=[(text, name) for name, text in texts.NEGATIVES_HELP.items()],
                                value=d.negatives, label="Negatives (residual, triplet, in-batch)", scale=2)
    # no bounds on the numbers here: the training's own check (``TrainConfig.validate``) refuses a value out of
    # range naming it, which the status then says (Gradio's own check names no field, and its refusal reaches
    # no handler)
    with gr.Row():
        epochs = gr.Number(d.epochs, label="Epochs", precision=0)
        batch = gr.Number(d.batch_size, label="Batch size", precision=0, elem_id="train-batch")
        lr = gr.Number(d.lr, label="Learning rate")
        seq = gr.Number(d.max_seq_length, label="Max sequence length (training inputs)", precision=0,
                        elem_id="train-seq")
        steps = gr.Number(0, label="Max steps per epoch (0: all)", precision=0,
                          elem_id="train-steps")  # 0, not None: Gradio's Number shows None as 0 anyway
    with gr.Row():
        margin = gr.Number(d.margin, label="Margin m (quadruplet, triplet)")
        xi = gr.Number(d.xi, label="ξ (residual; paper 1.0 for unnormalized BERT)")
        lam = gr.Number(d.lambda_train, label="λ_train (residual; 0 = constant margin)")
        device = gr.Dropdown(DEVICES, value=d.device, label="Device")
        cold = gr.Slider(0.05, 0.95, value=0.8, step=0.05,
                         label="Cold-start train fraction (without a train split, or training on judged queries)")
        # every kind to begin with, so that a client of the API on a linked corpus can ask for WLP (``start``
        # refuses it on a corpus without links); opening the tab narrows the list to the session's data set's
        pretrain = gr.Dropdown([(texts.PRETRAIN_HELP[k], k) for k in ("", *PRETRAIN_TASKS)], value="",
                               label="First stage on pseudo pairs (ICT/BFS/WLP)", info=pretrain_choices(ctx.start)[1],
                               elem_id="train-pretrain")
    with gr.Row():
        pooling = gr.Dropdown([(texts.POOLING_HELP[p], p) for p in QUERY_POOLINGS], value=d.query_pooling,
                              label="Query pooling (documents: always the base's)", elem_id="train-pooling")
        codes = gr.Number(d.poly_codes, label="Context codes m (poly-attention)", precision=0)
        positives = gr.Number(d.positives_per_query, label="Positives per query per epoch (0: every pair)",
                              precision=0)
        holdout = gr.Number(d.holdout, label="Held-out share: keep the best epoch, or the base (0: off)",
                            elem_id="train-holdout")
        refit = gr.Checkbox(d.refit, label="Then refit on all of train for the kept epochs", elem_id="train-refit")
        teacher = gr.Dropdown([(label(t), t) for t in TEACHERS], value=d.teacher, label="Teacher (Margin-MSE)",
                              elem_id="train-teacher")
    with gr.Row():
        train_btn = gr.Button("Start training", variant="primary", elem_id="train-button")
        judged_btn = gr.Button("Train on my judged queries", elem_id="train-judged")
        cancel_btn = gr.Button("Cancel", variant="stop")
        resume_btn = gr.Button("Resume the last stopped run", elem_id="train-resume")
    job_state = gr.State("")
    status = gr.Markdown(elem_id="train-status")
    loss_plot = gr.Plot(label="Loss")
    results = table(RESULT_HEADERS, elem_id="train-results")
    per_query_note = gr.Markdown("Per query (nDCG@10 on the evaluated split): what fine-tuning fixed first, what it "
                                 "broke last.", elem_id="train-per-query-note")
    per_query = table(PER_QUERY_HEADERS, elem_id="train-per-query")
    timer = gr.Timer(1.0, active=False)

    def on_train(key, loss_, negatives_, epochs_, batch_, lr_, seq_, steps_, margin_, xi_, lam_, device_,
                 cold_, pretrain_="", pooling_=None, codes_=None, per_query_=None, holdout_=None, refit_=None,
                 teacher_=None, family_=None, request: gr.Request | None = None, *, on: str | None = None):
        """``on``: the split to train on (``JUDGED``: cut by query, the cold-start fraction trains and base and
        trained are evaluated on the rest); None: the train split, or a cold-start split without one."""
        values = dict(loss=loss_, negatives=negatives_, epochs=epochs_, batch_size=batch_, lr=lr_,
                      max_seq_length=seq_, max_steps_per_epoch=steps_, margin=margin_, xi=xi_, lambda_train=lam_,
                      device=device_, pretrain=pretrain_, query_pooling=pooling_, poly_codes=codes_,
                      positives_per_query=per_query_, holdout=holdout_, refit=refit_, teacher=teacher_,
                      family=family_)
        job_id = start(ctx.registry, ctx.jobs, ctx.labelled(key, request), values, cold_, on=on,
                       session=session_of(request), address=address_of(request))
        return job_id, f"Job `{job_id}` queued.", gr.Timer(active=True)

    @functools.wraps(on_train)  # its signature, so that Gradio passes the request (a partial's it cannot read)
    def on_train_judged(*args, **kwargs):
        return on_train(*args, **kwargs, on=JUDGED)

    def on_resume(key: str, request: gr.Request):
        job_id = resume(ctx.registry, ctx.jobs, ctx.labelled(key, request), session_of(request), address_of(request))
        return job_id, f"Job `{job_id}` resumed: it goes on from its last finished epoch.", gr.Timer(active=True)

    def on_poll(job_id: str, key: str):
        if not job_id:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.Timer(active=False)
        try:
            queries = ctx.workspace(key).dataset.queries
        except gr.Error:  # the data set was closed meanwhile: ids without their text
            queries = {}
        *shown, running = poll(ctx.jobs, job_id, queries)
        return (*shown, gr.Timer(active=running))

    def training_status(job_id: str) -> dict:
        """A training job's state, progress, losses and (when done) base vs fine-tuned metrics."""
        return job_status(ctx.jobs, job_id)

    gr.api(training_status, api_name="training_status")
    inputs = [ctx.key, loss, negatives, epochs, batch, lr, seq, steps, margin, xi, lam, device, cold,
              pretrain, pooling, codes, positives, holdout, refit, teacher, family]
    dense_only = dict(zip(DENSE_ONLY, (margin, xi, lam, pretrain, pooling, codes, refit, teacher), strict=True))

    def on_family(family_: str, loss_: str, negatives_: str):
        """The learned sparse model picked: the fields it does not read are hidden, and a loss, negatives,
        first stage or query pooling it cannot train with go back to what it can; the dense encoder: all shown."""
        sparse = family_ == "sparse"
        kept = {"pretrain": "", "query_pooling": d.query_pooling}  # what the sparse model's config refuses otherwise
        return (gr.update(value=SPARSE_LOSSES[0]) if sparse and loss_ not in SPARSE_LOSSES else gr.skip(),
                gr.update(value=SPARSE_NEGATIVES[0]) if sparse and negatives_ not in SPARSE_NEGATIVES else gr.skip(),
                *(gr.update(visible=not sparse, **({"value": kept[name]} if sparse and name in kept else {}))
                  for name in dense_only))

    family.input(on_family, [family, loss, negatives], [loss, negatives, *dense_only.values()],
                 api_visibility="private", **LIGHT)
    refused = Refusals()  # why a start or a resume failed: the status says it, not Gradio's bare "Error"

    def failed(what: str):
        def line(request: gr.Request):
            return refused.line(what, request)
        return line

    for button, handler, kept_inputs, name, what in (
            (train_btn, on_train, inputs, "train", "Could not start the training"),
            (judged_btn, on_train_judged, inputs, "train_on_judged", "Could not start the training"),
            (resume_btn, on_resume, [ctx.key], "resume_training", "Could not resume the training")):
        button.click(refused.kept(handler), kept_inputs, [job_state, status, timer], api_name=name, **LIGHT).failure(
            failed(what), None, status, api_visibility="private", **LIGHT)
    timer.tick(on_poll, [job_state, ctx.key], [status, loss_plot, results, per_query_note, per_query, timer],
               api_visibility="private", **LIGHT)
    def on_cancel(job_id: str, request: gr.Request):
        return cancel(ctx.registry, ctx.jobs, job_id, session_of(request))

    cancel_btn.click(on_cancel, job_state, status, api_name="cancel_training", **LIGHT)

    def on_open(key: str, chosen: str | None):
        """The first stages the session's data set can train, the one chosen kept where it still can."""
        try:
            ws = ctx.workspace(key)
        except gr.Error:  # closed to free memory: the start says so
            return gr.skip()
        choices, line = pretrain_choices(ws)
        keep = chosen if chosen in {value for _, value in choices} else ""
        return gr.update(choices=choices, value=keep, info=line)

    tab.select(on_open, [ctx.key, pretrain], pretrain, api_visibility="private", show_progress="hidden", **LIGHT)
