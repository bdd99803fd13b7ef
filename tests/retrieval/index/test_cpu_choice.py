"""The encoder's CPU choice under load: measured in interleaved rounds, decided only on a quiet
machine whose rounds agree, provisional otherwise, and measured again when encoding disagrees."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from retrieval.index import cpu_choice, encoder, machine_load
from retrieval.index.cpu_choice import DEFAULT, RETRY_AFTER_S, ROUNDS, SPREAD_BOUND, choices_file, choose
from retrieval.index.encoder import Encoder
from retrieval.index.machine_load import Reading
from tests.helpers import quiet_machine


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("RANKSCOPE_HOME", str(tmp_path))
    return tmp_path


def _record():
    (record,) = json.loads(choices_file().read_text()).values()
    return record


def _counting(calls: list, seconds=lambda precision, batch, round_: 1.0 / batch):
    """A timer of made-up seconds, by candidate and by the round it is in (a warm-up is round −1)."""
    def timer(precision: str, batch: int) -> float:
        prior = calls.count((precision, batch))
        calls.append((precision, batch))
        return seconds(precision, batch, prior - 1)
    return timer


def test_beside_busy_loops_the_calibration_remembers_no_choice_and_measures_again_later(tiny_encoder, home):
    """Busy-loop processes of its own on every core: the real calibration (the tiny model encoding
    for real, the machine read for real) keeps a provisional choice and does not decide; a load
    within ``RETRY_AFTER_S`` does not measure again; one after it, on a quiet machine, decides."""
    model = tiny_encoder.model
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(machine_load.cores())]
    try:
        time.sleep(0.5)  # running
        encodes: list = []

        def encode(precision: str, batch: int, texts: list[str]) -> None:
            encodes.append((precision, batch))
            Encoder(model, precision=precision, batch_size=batch).encode(texts)
            time.sleep(0.05)  # long enough a round for the other processes' CPU time to be read
        choice = choose(model, encode=encode)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    assert choice.provisional.startswith("the machine was busy: ")
    assert _record()["provisional"] == choice.provisional  # remembered as provisional, not decided
    assert "provisional (the machine was busy" in choice.how
    assert "measured again at a load after 10 minutes" in choice.how
    again: list = []
    assert choose(model, encode=lambda *a: again.append(a)).provisional and not again  # not at every load
    later = choose(model, _counting(again), machine=quiet_machine, now=lambda: time.time() + RETRY_AFTER_S + 1)
    assert again and not later.provisional and not _record()["provisional"]  # decided once quiet
    assert choose(model, encode=lambda *a: 1 / 0) == replace(later, remembered=True)  # and used from then on


def test_rounds_that_disagree_leave_the_choice_provisional(tiny_encoder, home):
    calls: list = []

    def wobbly_seconds(precision: str, batch: int, round_: int) -> float:
        return (1.0 + 0.5 * (round_ == 1)) / batch
    wobbly = _counting(calls, wobbly_seconds)
    choice = choose(tiny_encoder.model, wobbly, machine=quiet_machine)
    assert len(calls) in ((1 + ROUNDS) * 3, 2 * (1 + ROUNDS) * 3)  # a warm-up of each candidate, the rounds
    assert choice.spread == pytest.approx(0.5) and choice.spread > SPREAD_BOUND
    assert choice.provisional == "its rounds disagreed by 50%, more than 10%" and choice.batch_size == 32
    steady = choose(tiny_encoder.model, _counting([]), machine=quiet_machine, now=lambda: time.time() + 3600)
    assert not steady.provisional and steady.spread == 0
    # a decided choice flagged to be measured again, whose rounds disagree: kept, and saying why
    cpu_choice.choices_file().write_text(json.dumps({steady.key: {**_record(), "recheck": "x", "measured_at": 0.0}}))
    again: list = []
    kept = choose(tiny_encoder.model, _counting(again, wobbly_seconds), machine=quiet_machine)
    assert again  # measured
    assert (kept.precision, kept.batch_size, kept.rates) == (steady.precision, steady.batch_size, steady.rates)
    assert kept.how.startswith("provisional (its rounds disagreed by 50%, more than 10%): fastest of")
    assert _record()["recheck"] == "x" and not _record()["provisional"]  # remembered as the decided one, flagged


def test_a_machine_busy_before_the_rounds_is_not_measured(tiny_encoder, home):
    def loaded():
        return Reading(time.monotonic(), 5.2, 2, 0.0, 0.0)
    calls: list = []
    choice = choose(tiny_encoder.model, _counting(calls), machine=loaded)
    assert not calls and (choice.precision, choice.batch_size) == DEFAULT and not choice.rates
    assert choice.provisional == "the machine was busy: load 5.2 on 2 cores"
    assert "the default fp32, none measured" in choice.how
    # a choice flagged to be measured again, at a busy load: used as it was, saying why it was not measured
    flagged = {**_record(), "precision": "fp32", "batch_size": 16, "provisional": "", "rounds": 3,
               "rates": {"fp32/16": 9.0}, "recheck": "encoding ran at 10 tokens/s, the calibration at 90",
               "measured_at": 0.0}
    cpu_choice.choices_file().write_text(json.dumps({choice.key: flagged}))
    kept = choose(tiny_encoder.model, _counting(calls), machine=loaded)
    assert not calls and (kept.precision, kept.batch_size) == ("fp32", 16)
    assert kept.how.startswith("provisional (the machine was busy: load 5.2 on 2 cores): fastest of fp32 at 16")
    assert _record()["recheck"]  # still flagged: measured at the next quiet load


def test_an_encoding_far_from_its_calibration_on_a_quiet_machine_is_measured_again(tiny_encoder, home, monkeypatch):
    """The rate seen when encoding for real (tokens a second, counted by the model's own tokenizer)
    against the calibration's: apart by more than ``RECHECK_FACTOR`` on a quiet machine, the choice
    is flagged and the next load measures again; on a busy machine, or within the factor, it is not."""
    model = tiny_encoder.model
    calls: list = []
    decided = choose(model, _counting(calls), machine=quiet_machine)
    monkeypatch.setattr(encoder, "RATE_CHECK_S", 0.0)
    texts = [f"passage {i} about retrieval and ranking of documents" for i in range(300)]

    def encoded(choice, reading=quiet_machine):
        monkeypatch.setattr(machine_load, "read", reading)
        enc = Encoder(model, precision=decided.precision, batch_size=decided.batch_size, cpu_choice=choice)
        enc.encode(texts)
        return enc.rate_check

    fast = replace(decided, token_rate=1e12)  # calibrated impossibly fast: the encoding is far slower

    def busy():
        return Reading(time.monotonic(), 0.0, 2, time.monotonic() * 2, 0.0)  # others on both cores
    assert encoded(fast, busy) is None and not _record()["recheck"]  # a busy machine's rate says nothing
    seen = encoded(replace(decided, token_rate=1.0))  # calibrated slow: far faster
    assert seen is not None and seen.startswith("encoding ran at ") and _record()["recheck"] == seen
    before = len(calls)
    again = choose(model, _counting(calls), machine=quiet_machine)
    assert len(calls) > before and not again.recheck and not _record()["recheck"]  # measured again, cleared
    assert "measured again at the next load (encoding ran at" in replace(again, recheck=seen).how
    at = 1000.0  # tokens a second in calibration: 1,500 or 600 seen are within the factor of 2
    for seen_tokens in (1500, 600):
        assert cpu_choice.check_rate(replace(decided, token_rate=at), seen_tokens, 1.0, quiet_machine(),
                                     quiet_machine()) is None
    assert cpu_choice.check_rate(replace(decided, token_rate=at), 2100, 1.0, quiet_machine(), quiet_machine())


def test_the_data_summary_wording_says_how_the_choice_was_made(tiny_encoder):
    provisional = cpu_choice.CpuChoice("fp32", 32, 2, "AMD EPYC (family 26, model 2; avx2)", key="k",
                                       provisional="the machine was busy: load 5.2 on 2 cores")
    enc = Encoder(tiny_encoder.model, precision="fp32", batch_size=32, cpu_choice=provisional)
    assert enc.compute == ("cpu, fp32, batch 32 (provisional (the machine was busy: load 5.2 on 2 cores): the "
                           "default fp32, none measured; measured again at a load after 10 minutes on a quiet "
                           "machine; on AMD EPYC (family 26, model 2; avx2), 2 threads)")


def test_other_processes_cpu_time_is_the_machine_s_less_this_process_s():
    stat = "cpu  1000 20 300 90000 50 7 3 10 0 0\ncpu0 1 2 3\n"
    assert machine_load._busy_seconds(stat) == pytest.approx(1340 / machine_load.os.sysconf("SC_CLK_TCK"))
    assert machine_load._busy_seconds("intr 1 2\n") is None
    first, last = Reading(0.0, 0.5, 2, 100.0, 10.0), Reading(10.0, 0.5, 2, 115.0, 14.0)
    assert machine_load.others_between(first, last) == pytest.approx(1.1)  # (15 − 4) / 10 s
    assert machine_load.busy_between(first, last) == "other processes used 1.1 of 2 cores"
    calm = Reading(10.0, 0.5, 2, 105.0, 14.0)
    assert machine_load.busy_between(first, calm) is None
    unknown = Reading(0.0, 2.5, 2, None, 0.0)
    assert machine_load.busy_between(unknown, unknown) == "load 2.5 on 2 cores"  # only the load to go by
    now = machine_load.read()
    if sys.platform.startswith("linux"):
        assert now.busy_s is not None and now.load is not None and now.cores >= 1
