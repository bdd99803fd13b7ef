"""One fine-tuning end to end: split → pairs → train → export → evaluate against the base.

The evaluation split never contains a training query: the data set's ``train`` split trains and
its test (default) split evaluates; without a train split, a seeded cold-start split of the
evaluation split's queries is made (``cold_start`` = training fraction) and both halves are
reported. The exported folder is a normal sentence-transformers model with a model card, so
``SentenceTransformer(path)`` and ``python -m retrieval evaluate DATASET --model path`` load it.

With ``TrainConfig.pretrain`` a first stage trains on pseudo pairs (ICT, BFS, WLP or a combination:
``training.pairs``) before the labelled one: the multi-stage paradigm of Yiding Liu, Guan Huang,
Jiaxiang Liu, Weixue Lu, Suqi Cheng, Yukun Li, Daiting Shi, Shuaiqiang Wang, Zhicong Cheng, Dawei
Yin, "Pre-trained Language Model for Web-scale Retrieval in Baidu Search", KDD 2021 (arXiv:2106.03373), §4.
"""
from __future__ import annotations

import copy
import json
import shutil
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data.dataset import Dataset, queries_fingerprint
from retrieval.evaluation.measures import compare
from retrieval.evaluation.metrics import PNR, PRIMARY, SUMMARY_METRICS, cell
from retrieval.index.dense_index import embed_corpus
from retrieval.index.encoder import TRAINING_RECORD, Encoder, load_encoder, read_training_record
from retrieval.progress import Progress, scaled
from retrieval.store import Store
from retrieval.systems import ENCODER_SYSTEMS, HYBRID, SPARSE_SYSTEMS
from retrieval.systems.hybrid import CLEAR
from retrieval.training_record import LambdaFit, TrainedOn
from retrieval.workspace import Workspace
from training.holdout import MIN_LABELLED, HeldOutSelector, split_holdout
from training.pairs import (
    check_links,
    cold_start_split,
    counted,
    labelled_pairs,
    most_pairs_per_epoch,
    pseudo_pairs,
)
from training.poly import has_poly_attention, make_portable
from training.stopping import Doing, cancel_points
from training.trainer import (
    Teacher,
    TrainConfig,
    Trainer,
    TrainingProgress,
    TrainResult,
    encoding_progress,
    load_trainable,
)


@dataclass
class Plan:
    dataset: Dataset  # the data set as trained and evaluated (a cold-start copy when split here)
    train_split: str
    eval_split: str
    note: str


def plan_splits(dataset: Dataset, eval_split: str | None = None, cold_start: float | None = None,
                seed: int = 42, train_split: str = "train") -> Plan:
    """Which split trains and which evaluates; a training query is never evaluated on."""
    eval_split = eval_split or dataset.default_split()
    if eval_split is None:
        raise ValueError(f"{dataset.name} has no relevance labels: train on pseudo pairs (ICT, BFS, WLP) instead")
    if cold_start is None and train_split in dataset.qrels and eval_split != train_split:
        note = f"trained on the '{dataset.name}' {train_split} split, evaluated on its '{eval_split}' split"
        shared = set(dataset.qrels[train_split]) & set(dataset.qrels.get(eval_split, {}))
        if shared:  # a query labelled in both splits is evaluated on, so it is not trained on
            train = {q: v for q, v in dataset.qrels[train_split].items() if q not in shared}
            dataset = Dataset(dataset.name, dataset.docs, dataset.queries, {**dataset.qrels, train_split: train},
                              dataset.report)
            n = len(shared)
            note += f" ({n} {'query' if n == 1 else 'queries'} labelled in both left out of training)"
        return Plan(dataset, train_split, eval_split, note)
    fraction = cold_start if cold_start is not None else 0.8
    split = cold_start_split(dataset, eval_split, fraction, seed)
    return Plan(split, "train", "test",
                f"cold-start split of '{eval_split}' by query (seed {seed}): {len(split.qrels['train'])} queries "
                f"train ({fraction:.0%}), {len(split.qrels['test'])} evaluate")


@dataclass
class FineTuneResult:
    model_path: str
    device: str
    seconds: float
    plan_note: str
    eval_split: str
    metrics: dict = field(default_factory=dict)  # {"base": {system: {metric}}, "fine-tuned": {...}}
    significance: dict = field(default_factory=dict)  # {system: {metric: p}}
    differences: dict = field(default_factory=dict)  # {system: {metric: {"delta", "interval": [low, high]}}}
    per_query: dict = field(default_factory=dict)  # {system: {query id: [base nDCG@10, fine-tuned nDCG@10]}}
    losses: list = field(default_factory=list)
    epoch_losses: list = field(default_factory=list)
    stages: list = field(default_factory=list)
    selection: dict | None = None  # ``holdout.Selection``: held-out scores per epoch and the one kept
    verdict: str = ""  # the held-out check's line (what was kept, refit or not), or why none was made

    def to_json(self) -> dict:
        return asdict(self)


def noted_stages(stages: list) -> list[str]:
    """The lines of a result's ``stages`` a user is told beside the verdict: how many pseudo pairs each task
    made, and where a run resumed (the rest are each stage's losses)."""
    return [line for line in stages if isinstance(line, str)
            and (line.startswith("resumed after") or line.endswith(")") and " pseudo pairs (" in line)]


def finished_run(out_dir: str | Path, cfg: TrainConfig | None = None) -> FineTuneResult | None:
    """The result of a fine-tuning that finished in ``out_dir`` (its ``rankscope_training.json``; the
    losses are not kept there), when it was trained with ``cfg`` (any config when None); else None."""
    saved = read_training_record(out_dir)  # a regular file of the folder within its size, or None
    if saved is None or not isinstance(saved.get("result"), dict):  # none, damaged, or written before its evaluation
        return None
    # a field a record predates took its default then ("family": dense)
    if cfg is not None and {**asdict(TrainConfig()), **(saved.get("config") or {})} != asdict(cfg):
        return None
    return FineTuneResult(**saved["result"])


def evaluate_against_base(ws_base: Workspace, eval_split: str, tuned: Encoder,
                          progress: Progress | None = None) -> tuple[dict, dict, dict, dict]:
    """Dense and hybrid metrics of both encoders on ``eval_split`` with their 95% intervals (under
    each system's ``"intervals"``), the permutation-test p, the fine-tuned − base difference with
    its paired 95% interval (``{system: {metric: {"delta", "interval"}}}``), and each query's
    nDCG@10 under both (``{system: {query id: [base, fine-tuned]}}``).

    ``progress(fraction, what)`` is called while each encoder's corpus embeddings are built (from
    the store when cached); it may raise to stop (the job's cancel), before anything is stored.
    """
    ws_tuned = ws_base.with_model(tuned)
    out = compare_workspaces(ws_base, ws_tuned, eval_split, ENCODER_SYSTEMS,
                             lambda ws, p: ws.build_dense(progress=p), progress)
    for label, ws in (("base", ws_base), ("fine-tuned", ws_tuned)):
        out[0][label][HYBRID]["lambda"] = CLEAR.lambda_for(ws, eval_split).value
    return out


def compare_workspaces(ws_base: Workspace, ws_tuned: Workspace, eval_split: str, systems: tuple[str, ...],
                       build: Callable[[Workspace, Progress | None], object],
                       progress: Progress | None = None) -> tuple[dict, dict, dict, dict]:
    """``systems`` under the base and the fine-tuned workspace on ``eval_split``, as
    ``evaluate_against_base`` returns them; ``build(ws, progress)`` builds what a workspace's
    systems read (its index) first."""
    metrics: dict = {"base": {}, "fine-tuned": {}}
    pvalues: dict = {}
    differences: dict = {}
    evals = {}
    for label, ws in (("base", ws_base), ("fine-tuned", ws_tuned)):
        build(ws, scaled(progress, 0.0, 1.0, f"{label}: "))
        for system in systems:
            ev = ws.evaluate(system, eval_split)
            evals[(label, system)] = ev
            shown = [m for m in (*SUMMARY_METRICS, PNR) if m in ev.mean]
            metrics[label][system] = {m: ev.mean.get(m) for m in shown}
            metrics[label][system]["intervals"] = {m: ev.interval(m).to_json() for m in shown}
            # the weights it chose for the split (the three-way fusion's μ, say): they differ between the two
            metrics[label][system]["weights"] = {w.name: w.value for w in ws.system(system).weights(ws, eval_split)}
    per_query: dict = {}
    for system in systems:
        before, after = evals[("base", system)], evals[("fine-tuned", system)]
        cmps = {m: compare(before, after, m) for m in SUMMARY_METRICS}
        pvalues[system] = {m: c.p_value for m, c in cmps.items()}
        differences[system] = {m: {"delta": c.delta, "interval": c.interval.to_json()} for m, c in cmps.items()}
        b, a = before.per_query.get(PRIMARY, {}), after.per_query.get(PRIMARY, {})
        per_query[system] = {q: [round(b.get(q, 0.0), 4), round(a.get(q, 0.0), 4)] for q in sorted(set(b) | set(a))}
    return metrics, pvalues, differences, per_query


def model_card(cfg: TrainConfig, base_name: str, plan: Plan, result: FineTuneResult) -> str:
    rows = []
    for label, systems in result.metrics.items():
        for system, m in systems.items():
            bounds = m.get("intervals", {})
            rows.append(f"| {label} | {system} | " + " | ".join(cell(m.get(k), "", bounds.get(k))
                                                                  for k in SUMMARY_METRICS) + " |")
    p = result.significance
    source = {"quadruplet": " (QuadrupletBERT, two stages)", "residual": " (CLEAR residual margin)",
              "marginmse": f" (Margin-MSE distillation of {cfg.teacher})"}.get(cfg.loss, "")
    if cfg.family == "sparse":
        source = " (SPLADE: in-batch softmax with FLOPS regularization)"
    negatives = cfg.negatives if cfg.loss != "quadruplet" else "random n + model hard negatives"
    if cfg.family == "sparse":
        negatives = "one of BM25's top documents per query, in-batch"
    return f"""---
library_name: sentence-transformers
tags: [sentence-transformers, {'sparse-encoder, splade, ' if cfg.family == 'sparse' else ''}retrieval, rankscope]
base_model: {base_name}
---
# {Path(result.model_path).name}

Fine-tuned with RankScope from `{base_name}`.

- Loss: **{cfg.loss}**{source}; negatives: {negatives}
- Stages: {'; '.join(result.stages)}
- Parameters: `{json.dumps(asdict(cfg), sort_keys=True)}`
- Data: {plan.note} (data set `{plan.dataset.name}`, content hash `{plan.dataset.content_hash[:12]}`)
- Device: {result.device}; training time {result.seconds:.0f} s

## Evaluation ({result.eval_split} split)

| encoder | system | nDCG@10 | Recall@100 | MRR@10 |
|---|---|---|---|---|
{chr(10).join(rows)}

Paired permutation test, fine-tuned vs base, p-values: {json.dumps(p)}
"""


def _share_progress(stage: str, on_progress, cancel, cancelled: str | None = None) -> Callable[[float, str], None]:
    """The same for a workspace's ``progress(fraction, what)``, in thousandths; ``{what}`` in
    ``stage`` and ``cancelled`` is replaced by what the workspace is doing."""
    def share(fraction: float, what: str) -> None:
        encoding_progress(stage.replace("{what}", what), on_progress, cancel,
                           cancelled and cancelled.replace("{what}", what))(round(fraction * 1000), 1000)
    return share


def _both(first, second):
    if first is None:
        return second

    def hook(*args) -> None:
        first(*args)
        second(*args)
    return hook


def _held_out_selector(plan: Plan, cfg: TrainConfig, ws_base: Workspace, on_progress, cancel,
                       depth: int = 100) -> tuple[Dataset, HeldOutSelector, np.ndarray]:
    """(the data set to draw training pairs from, without the held-out queries; the selector, its
    candidates ranked, the base encoder not yet scored: ``_score_base``; the base's vectors of the
    held-out queries): ``cfg.holdout`` of the train split's queries, seeded. The base's corpus vectors
    come from the store where it holds them (the app's dense index was built from them), and the
    stage says how many were read and how many encoded."""
    train_data, held = split_holdout(plan.dataset, plan.train_split, cfg.holdout, cfg.seed)
    dense = ws_base.build_dense(progress=_share_progress("held-out check — the corpus under the base encoder",
                                                         on_progress, cancel))
    n = len(ws_base.dataset.doc_ids)
    why = "not in it" if ws_base.store is not None else "no store to read them from"
    encoding_progress(f"held-out check — the corpus under the base encoder: {dense.from_store + dense.repeats:,} "
                      f"of {n:,} documents read from the store, {dense.encoded:,} encoded ({why})", on_progress,
                      cancel)(n, n)
    queries = {q: plan.dataset.queries[q] for q in held if q in plan.dataset.queries}
    q_vecs = dense.encode_queries(queries)
    _, rows = dense.index.search_vectors(q_vecs, depth)
    selector = HeldOutSelector(plan.dataset, held, ws_base.bm25, {q: rows[i] for i, q in enumerate(queries)},
                               dense.encoder.precision, depth, CLEAR.query_max_space(ws_base),
                               dense.encoder.max_seq_length)
    return train_data, selector, q_vecs


def _score_base(selector: HeldOutSelector, ws_base: Workspace, q_vecs: np.ndarray, on_progress, cancel) -> None:
    """Score the base encoder (epoch 0) from the vectors its dense index holds, or the store holds,
    encoding only the candidates neither holds (the selector reads every model as the base encoder
    reads, so these are the vectors it would make); the stage says which, and why."""
    dense = ws_base.dense
    n = len(selector.union)
    held = dense.held_vectors(selector.doc_ids, selector.union)  # a local index's vectors, in the corpus's order
    if held is not None:
        doc_vecs = held
        said = f"held-out check — base encoder: its vectors of {n:,} candidate documents read from its dense index " \
               "(nothing encoded)"
        encoding_progress(said, on_progress, cancel)(n, n)
    else:  # another engine's index: the store's vectors, those it lacks encoded and kept
        stage = f"held-out check — base encoder: {n:,} candidate documents, read from the store where it holds them"
        embedded = embed_corpus(dense.encoder, selector.texts, ws_base.store, encoding_progress(stage, on_progress,
                                                                                              cancel))
        doc_vecs = embedded.vectors
        said = f"held-out check — base encoder: {embedded.from_store:,} of {n:,} candidate documents read from the " \
               f"store, {embedded.encoded:,} encoded (not in the store)"
        encoding_progress(said, on_progress, cancel)(n, n)
    selector.start_from(doc_vecs, q_vecs)


def _trained_on(plan: Plan, selector: HeldOutSelector | None, per_query_max: bool, refit: bool) -> TrainedOn:
    """The train split's queries the exported encoder was trained on, the hybrid's λ its held-out
    check fitted for the kept epoch, with the label-free prior as ``CLEAR.lambda_fit`` fits it
    (none without a check), and the queries that check kept out of its training — none where the
    encoder was ``refit`` on all of them — on which alone the three-way fusion's μ may be tuned
    (``retrieval.systems.hybrid3.unseen``)."""
    fit = selector.selection.lambda_fit if selector is not None else None
    held = tuple(sorted(selector.held)) if selector is not None and not refit else ()
    return TrainedOn(plan.train_split, queries_fingerprint(plan.dataset.split_queries(plan.train_split)),
                     LambdaFit.from_json(fit) if fit else None, per_query_max, held)


def distillation_teacher(cfg: TrainConfig, ws_base: Workspace, dataset: Dataset, split: str) -> Teacher | None:
    """For ``marginmse``, the teacher the encoder learns from: ``cfg.teacher`` (the CLEAR hybrid, say)
    as the app ranks ``dataset``'s ``split`` with the base encoder, its λ tuned on that split's
    labels (the held-out queries are not in ``dataset``); None for any other loss."""
    if cfg.loss != "marginmse":
        return None
    ws = ws_base if dataset is ws_base.dataset else ws_base.with_dataset(dataset)
    system = ws.system(cfg.teacher)

    def teach(rows: dict[str, list[int]], queries: dict[str, str]) -> dict[str, dict[str, float]]:
        scores = system.exact_scores(ws, split, rows, queries)
        if scores is None:
            raise ValueError(f"the teacher {cfg.teacher!r} has no score of its own to teach with")
        return scores
    return teach


def _refit(trained, kept: dict, cfg: TrainConfig, plan: Plan, base_model: str | None, start, common: dict,
           teacher: Teacher | None = None) -> str:
    """Train ``cfg`` again from ``start`` (the base, or the first stage's model) on every train query
    for the kept number of epochs, into ``trained`` (its model, time, losses and stages); returns
    what was done, for the verdict line. Quadruplet stage two's epochs count after a stage one run
    as before (``_refits`` says whether a refit is made)."""
    refit_cfg = replace(cfg, holdout=0.0, refit=False, epochs=int(kept["epoch"]))
    pairs = labelled_pairs(plan.dataset, plan.train_split)
    again = Trainer(refit_cfg, plan.dataset, pairs, base_model=base_model, model=start, stage_prefix="refit: ",
                    teacher=teacher,
                    **{**common, "checkpoint_dir": common["checkpoint_dir"] / "refit"}).train()
    queries = len(plan.dataset.qrels.get(plan.train_split, {}))
    trained.model, trained.seconds = again.model, trained.seconds + again.seconds
    trained.losses, trained.epoch_losses = trained.losses + again.losses, trained.epoch_losses + again.epoch_losses
    trained.stages += again.stages
    return f"refit on all {queries} train queries for {refit_cfg.epochs} epoch{'s' if refit_cfg.epochs != 1 else ''}"


def _refits(cfg: TrainConfig, kept: dict) -> bool:
    """Whether the held-out check's kept epoch is trained again on every train query: when
    ``cfg.refit`` asks and an epoch beat the base, but not an epoch inside quadruplet stage one
    (stage one alone cannot be asked for: the held-out run's weights stay)."""
    return cfg.refit and kept["stage"] != "base" and not kept["stage"].endswith("stage 1")


def _train_labelled(plan: Plan, cfg: TrainConfig, ws_base: Workspace, base_model: str | None, model, common: dict,
                    on_epoch) -> tuple[TrainResult, HeldOutSelector | None, str, TrainedOn | None]:
    """The labelled stage, from ``model`` (the first stage's, or None: the base), with its held-out
    check when ``cfg.holdout`` has queries to hold out, and a refit when asked. Returns (what was
    trained, the held-out selector or None, the verdict line, the queries the exported model saw or
    None when the base is exported)."""
    on_progress, cancel, checkpoints = common["on_progress"], common["cancel"], common["checkpoint_dir"]
    selector, verdict, trained_on = None, "", None  # the held-out check, what it kept, the queries seen
    refit = False  # whether the kept epochs were trained again on every train query
    train_data, epoch_hook = plan.dataset, on_epoch
    labelled = len(plan.dataset.qrels.get(plan.train_split, {}))
    check = bool(cfg.holdout) and labelled >= MIN_LABELLED  # else nothing to hold out: it trains on all
    start = copy.deepcopy(model) if model is not None and check and cfg.refit else model  # refit's start
    if check:
        train_data, selector, q_vecs = _held_out_selector(plan, cfg, ws_base, on_progress, cancel)
        epoch_hook = _both(on_epoch, lambda m, stage, epoch: selector.on_epoch(
            m, stage, epoch, encoding_progress(
                f"held-out check — {stage} epoch {epoch}: encoding {len(selector.union):,} candidate documents under "
                "its new weights", on_progress, cancel)))
    pairs = labelled_pairs(train_data, plan.train_split)
    trainer = Trainer(cfg, plan.dataset, pairs, base_model=base_model, model=model, on_epoch=epoch_hook,
                      hook_state=selector, teacher=distillation_teacher(cfg, ws_base, train_data, plan.train_split),
                      **{**common, "checkpoint_dir": checkpoints / "train"})
    trainer.resume()  # a resumed run brings the selector's scores back with it
    if selector is not None and not selector.started:
        _score_base(selector, ws_base, q_vecs, on_progress, cancel)
    trained = trainer.train()
    if selector is not None:
        kept = selector.selection.chosen or {}
        if not selector.restore_best(trained.model):  # no epoch beat the base: export the base itself
            trained.model = load_trainable(base_model, trained.device, cfg.max_seq_length)
        verdict = selector.describe()
        refit = _refits(cfg, kept)
        if cfg.refit and kept["stage"].endswith("stage 1"):
            verdict += "; not refit: the kept epoch is in quadruplet stage one"
        elif refit:
            verdict += "; " + _refit(trained, kept, cfg, plan, base_model, start, {**common, "on_epoch": on_epoch},
                                     distillation_teacher(cfg, ws_base, plan.dataset, plan.train_split))
    elif cfg.holdout:
        verdict = f"no held-out check: {labelled} labelled training query, none to hold out"
    if verdict:
        trained.stages.append(verdict)
    if selector is None or selector.best_state is not None:  # else the base is exported: it saw no query
        trained_on = _trained_on(plan, selector, CLEAR.query_max_space(ws_base), refit)
    return trained, selector, verdict, trained_on


def check_work(dataset: Dataset, cfg: TrainConfig) -> None:
    """A ValueError in one line when training ``cfg`` on ``dataset`` may ask for more examples than one
    job may (``TrainConfig.check_examples``), counted before anything is loaded: the pairs an epoch on
    ``dataset``'s largest split draws (``pairs.most_pairs_per_epoch``), every epoch of every stage.
    ``run_training`` checks it first; the app's queue (``training.job.JobQueue``) before a job waits."""
    cfg.check_examples(most_pairs_per_epoch(dataset, cfg.positives_per_query))


def run_training(dataset: Dataset, cfg: TrainConfig, out_dir: str | Path, base_model: str | None = None,
                 store: Store | None = None, eval_split: str | None = None, cold_start: float | None = None,
                 on_progress: Callable[[TrainingProgress], None] | None = None,
                 cancel: threading.Event | None = None, evaluate: bool = True,
                 train_split: str = "train",
                 on_epoch: Callable[[object, str, int], None] | None = None,
                 encoder: str | Encoder | None = None, precision: str | None = "auto") -> FineTuneResult:
    """Train ``cfg`` on ``dataset``, export to ``out_dir``, and (``evaluate``) compare with the base.

    ``on_epoch(model, stage, epoch)`` is called after every epoch of the labelled stage(s)
    (``Trainer``'s hook), e.g. for early stopping on a held-out split. ``cfg.family == "sparse"``
    trains the learned sparse model instead (``run_sparse_training``; ``base_model`` is then the
    sparse model, ``encoder`` the dense encoder its three-way fusion is evaluated with). A training that
    asks for more work than one job may is refused before anything is loaded (``check_work``).

    ``cancel``, once set, stops the run at the next module call of any model it runs on this thread
    (``training.stopping.cancel_points``), as well as between steps and chunks: within a batch, not a
    chunk or a step. ``precision``: the base dense encoder's (``load_encoder``'s), given by the app as
    its workspace's encoder has it, so that the corpus vectors its dense index was built from are the
    ones read here (the store keys them by the encoder's fingerprint, which covers the precision; "auto"
    may resolve otherwise in a later measurement, and the whole corpus would be encoded again).
    """
    check_links(dataset, cfg.pretrain)
    check_work(dataset, cfg)
    doing = Doing(on_progress)  # what the run said it was doing last: a cancel's message says it
    with cancel_points(cancel, doing.where):
        if cfg.family == "sparse":
            doing.note = " (the last finished epoch's checkpoint is kept)"  # as its own loop's cancel says
            return run_sparse_training(dataset, cfg, Path(out_dir), base_model, store, eval_split, cold_start,
                                       doing.report, cancel, evaluate, train_split, encoder, precision)
        return _run_dense(dataset, cfg, Path(out_dir), base_model, store, eval_split, cold_start, doing, cancel,
                          evaluate, train_split, on_epoch, precision)


def _run_dense(dataset: Dataset, cfg: TrainConfig, out_dir: Path, base_model: str | None, store: Store | None,
               eval_split: str | None, cold_start: float | None, doing: Doing,
               cancel: threading.Event | None, evaluate: bool, train_split: str,
               on_epoch: Callable[[object, str, int], None] | None, precision: str | None) -> FineTuneResult:
    """``run_training`` of the dense encoder (``doing``: its progress, and what a cancel says)."""
    on_progress = doing.report
    has_labels = dataset.default_split() is not None
    if not has_labels and not cfg.pretrain:
        raise ValueError(f"{dataset.name} has no relevance labels: train on pseudo pairs (pretrain ict, bfs, "
                         "wlp or a combination such as ict+bfs), or add a qrels file")
    plan = plan_splits(dataset, eval_split, cold_start, cfg.seed, train_split) if has_labels else \
        Plan(dataset, "", "", f"pseudo pairs ({cfg.pretrain}) from the unlabeled corpus; nothing to evaluate on")
    base = load_encoder(base_model, device=cfg.device, precision=precision)
    ws_base = Workspace(plan.dataset, store, model=base)
    checkpoints = out_dir / "checkpoints"  # one folder a stage; a run started again resumes from them
    common: dict[str, Any] = dict(bm25=ws_base.bm25, on_progress=on_progress, cancel=cancel, checkpoint_dir=checkpoints)
    model = None
    if cfg.pretrain:
        # the multi-stage paradigm (Baidu §4): pseudo pairs first, labelled pairs after
        pseudo = pseudo_pairs(plan.dataset, cfg.pretrain, cfg.pretrain_pairs, cfg.seed)
        if not pseudo:
            raise ValueError(f"{cfg.pretrain} makes no pseudo pairs from {dataset.name}: its documents have no "
                             "sentence of three words or more (and, for WLP, no link between two such documents)")
        pre_cfg = replace(cfg, loss="inbatch", negatives="random", epochs=1)
        pre = Trainer(pre_cfg, plan.dataset, pseudo, base_model=base_model, stage_prefix=f"pretrain {cfg.pretrain}: ",
                      **{**common, "checkpoint_dir": checkpoints / "pretrain"}).train()
        made = ", ".join(f"{task} {n:,}" for task, n in counted(pseudo).items())
        pre.stages = [f"pretrain {cfg.pretrain}: {len(pseudo):,} pseudo pairs ({made or 'none'})", *pre.stages]
        model = pre.model
    selector, verdict, trained_on = None, "", None  # the held-out check, what it kept, the queries seen
    if has_labels:
        trained, selector, verdict, trained_on = _train_labelled(plan, cfg, ws_base, base_model, model, common,
                                                                 on_epoch)
        if cfg.pretrain:
            trained.losses, trained.epoch_losses = pre.losses + trained.losses, pre.epoch_losses + trained.epoch_losses
            trained.seconds += pre.seconds
            trained.stages = pre.stages + trained.stages
    else:
        trained, evaluate = pre, False
    # max_seq_length is a training-time economy: the exported encoder reads as far as the base
    trained.model.max_seq_length = base.max_seq_length
    trained.model.save(str(out_dir))
    if has_poly_attention(trained.model):
        make_portable(out_dir)
    result = FineTuneResult(str(out_dir), trained.device, trained.seconds, plan.note, plan.eval_split,
                            losses=trained.losses, epoch_losses=trained.epoch_losses, stages=trained.stages,
                            selection=asdict(selector.selection) if selector else None,
                            verdict=verdict)
    tuned = Encoder(trained.model, name=str(out_dir), precision=base.precision)  # compared like for like
    tuned.trained_on = trained_on  # its hybrid's λ is not tuned on the queries it trained on
    if evaluate:
        doing.note = f"; the model was saved to {out_dir}"
        encoding = _share_progress("evaluating — {what}", on_progress, cancel,
                                   f"cancelled while evaluating ({{what}}); the model was saved to {out_dir}")
        encoding(0.0, "starting")
        result.metrics, result.significance, result.differences, result.per_query = evaluate_against_base(
            ws_base, plan.eval_split, tuned, encoding)
    if store is not None:
        store.register_model(tuned.fingerprint, str(out_dir), tuned.dim,
                             {"base": base.name, "loss": cfg.loss, "dataset": plan.dataset.content_hash})
    (out_dir / "README.md").write_text(model_card(cfg, base.name, plan, result))
    (out_dir / TRAINING_RECORD).write_text(json.dumps(
        {"config": asdict(cfg), "result": {k: v for k, v in result.to_json().items() if k != "losses"},
         "trained_on": trained_on.to_json() if trained_on else None}, indent=2))
    shutil.rmtree(checkpoints, ignore_errors=True)  # kept until now: a run killed while evaluating resumes at once
    return result


def _base_mu(ws_base: Workspace, plan: Plan, on_progress, cancel) -> LambdaFit | None:
    """The three-way fusion's μ the base sparse model is given on the training split (``hybrid3.base_mu``):
    the prior the fine-tuned model's own μ must beat. Builds what it reads (the evaluation reads it too)."""
    from retrieval.systems import hybrid3

    building = _share_progress("the base model's three-way μ — {what}", on_progress, cancel,
                               "cancelled while tuning the base model's three-way μ ({what})")
    ws_base.build_dense(progress=scaled(building, 0.0, 0.5, "dense: "))
    ws_base.build_sparse(progress=scaled(building, 0.5, 1.0, "sparse: "))
    return hybrid3.base_mu(ws_base, plan.train_split, plan.eval_split)


def run_sparse_training(dataset: Dataset, cfg: TrainConfig, out_dir: Path, base_model: str | None = None,
                        store: Store | None = None, eval_split: str | None = None, cold_start: float | None = None,
                        on_progress: Callable[[TrainingProgress], None] | None = None,
                        cancel: threading.Event | None = None, evaluate: bool = True,
                        train_split: str = "train", encoder: str | Encoder | None = None,
                        precision: str | None = "auto") -> FineTuneResult:
    """``run_training`` for the learned sparse model (``cfg.family == "sparse"``; ``base_model``: the
    sparse model to start from, None the bundled SPLADE-tiny): the same splits, pairs and held-out
    guard (``training.sparse``); exported as a ``SparseEncoder`` folder, registered in the store
    (its vectors are kept there under its fingerprint), and compared with the base on the learned
    sparse systems (SPLADE and the three-way fusion) with paired intervals."""
    from retrieval.index.splade import load_sparse_model
    from training import sparse

    if dataset.default_split() is None:
        raise ValueError(f"{dataset.name} has no relevance labels: the learned sparse model trains on labelled "
                         "queries (judge some, or add a qrels file)")
    plan = plan_splits(dataset, eval_split, cold_start, cfg.seed, train_split)
    ws_base = Workspace(plan.dataset, store, model=encoder, sparse_model=base_model, precision=precision)
    checkpoints = out_dir / "checkpoints"
    def base_top(queries: dict[str, str], k: int) -> dict[str, list[int]]:
        index = ws_base.build_sparse(_share_progress("held-out check — the corpus under the base sparse model",
                                                     on_progress, cancel))
        row_of = ws_base.doc_row
        return {q: [row_of[d] for d, _ in hits] for q, hits in index.search(queries, k).items()}

    trained, selection, verdict, kept = sparse.train_sparse(plan.dataset, plan.train_split, cfg, ws_base.bm25,
                                                            base_model, base_top, checkpoints, on_progress, cancel,
                                                            store)
    sparse.export(trained, out_dir)
    trained_on = None  # the base exported: it saw no query
    if selection is None or selection.chosen:
        held_out = tuple(sorted(selection.per_query.get("0", {}))) if selection is not None else ()
        trained_on = TrainedOn(plan.train_split, queries_fingerprint(plan.dataset.split_queries(plan.train_split)),
                               held_out=held_out,  # the fusion's μ is tuned on these, which it never saw …
                               base_mu=_base_mu(ws_base, plan, on_progress, cancel),  # … against the base's μ
                               base_mu_beside=ws_base.encoder.fingerprint)  # … tuned beside this dense encoder

    def write_record(result: FineTuneResult | None = None) -> None:
        (out_dir / TRAINING_RECORD).write_text(json.dumps(
            {"config": asdict(cfg), **({"result": {k: v for k, v in result.to_json().items() if k != "losses"}}
                                       if result is not None else {}),
             "trained_on": trained_on.to_json() if trained_on else None}, indent=2))

    write_record()  # first without a result: the evaluation's μ reads which queries the model trained on
    base = load_sparse_model(base_model)
    result = FineTuneResult(str(out_dir), trained.device, trained.seconds, plan.note, plan.eval_split,
                            losses=trained.losses, epoch_losses=trained.epoch_losses, stages=trained.stages,
                            selection=asdict(selection) if selection else None, verdict=verdict)
    tuned = load_sparse_model(str(out_dir))  # the instance the evaluation's workspace reads: loaded once
    sparse.keep_vectors(store, tuned, kept)  # the held-out check encoded the corpus with it already
    if evaluate:
        encoding = _share_progress("evaluating — {what}", on_progress, cancel,
                                   f"cancelled while evaluating ({{what}}); the model was saved to {out_dir}")
        encoding(0.0, "starting")
        ws_tuned = ws_base.with_sparse_model(str(out_dir))
        result.metrics, result.significance, result.differences, result.per_query = compare_workspaces(
            ws_base, ws_tuned, plan.eval_split, SPARSE_SYSTEMS, lambda ws, p: (ws.build_dense(progress=p),
                                                                                 ws.build_sparse(progress=p)),
            encoding)
    sparse.register(store, tuned, out_dir, base.name, plan.dataset)
    (out_dir / "README.md").write_text(model_card(cfg, base.name, plan, result))
    write_record(result)
    shutil.rmtree(checkpoints, ignore_errors=True)
    return result
