"""Training jobs on a shared app, asked for as a stranger would: through ``gradio_client``, one
session or many fresh ones (an API client gives no browser token, so each new session is a new
maker), from one client address or from many (the address the server sees: a client on the same
machine as the app is a trusted proxy to uvicorn, so its ``X-Forwarded-For`` is taken as the client's,
which is how these tests stand for clients on other machines).

The bounds are the queue's own records (``training.job.JobLimits``): a session cannot queue a second
job, many sessions from one address hold at most ``PER_ADDRESS``, many addresses at most the waiting
cap; the work one job asks for is the training config's own check. The app runs for real (tiny
random-weight encoder, a real store); every job a test queues is cancelled before it ends.
"""
from __future__ import annotations

import time

import pytest

from tests.conftest import DEMO
from tests.helpers import patience
from tests.security.test_hostile import error_of

pytestmark = [pytest.mark.server, pytest.mark.slow]  # starts the real app

# the /train form: loss, negatives, epochs, batch size, learning rate, max sequence length, max steps per
# epoch (0: all), margin, ξ, λ_train, device, cold-start fraction; 100 epochs: longer than any test waits
FORM = ("triplet", "bm25", 100, 2, 1e-3, 32, 0, 0.1, 0.3, 0.01, "cpu", 0.8)
FINAL = ("done", "failed", "cancelled", "interrupted")


@pytest.fixture(scope="module")
def shared_app(tiny_model_dir, tmp_path_factory):
    import app as rankscope_app

    store = tmp_path_factory.mktemp("hostile-jobs") / "store.sqlite3"
    demo, registry = rankscope_app.create(DEMO, model=str(tiny_model_dir), store_path=str(store), shared=True)
    demo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True,
                        **rankscope_app.launch_kwargs(registry.store))
    yield demo.local_url, registry
    demo.close()


def session(url: str, address: str | None = None):
    """A fresh session (a new ``gradio_client`` client), seen from ``address`` when one is given."""
    from tests.helpers import app_client

    return app_client(url, headers={"X-Forwarded-For": address} if address else None)


def queued(client, *form) -> str:
    """The id of the job ``/train`` queued for ``client``."""
    said = client.predict(*(form or FORM), api_name="/train")[0]
    assert said.startswith("Job `") and said.endswith("` queued."), said
    return said.split("`")[1]


def end(registry, clients) -> None:
    """Each client cancels its job (``/cancel_training``: the session's own), then every job has ended."""
    for client in clients:
        assert client.predict(api_name="/cancel_training").startswith("Cancelling"), client
    deadline = time.time() + patience(120)
    while any(job["status"] not in FINAL for job in registry.store.jobs()):
        assert time.time() < deadline, registry.store.jobs()
        time.sleep(0.1)


def running(registry, job_id: str) -> None:
    deadline = time.time() + patience(120)
    while registry.store.get_job(job_id)["status"] != "running":
        assert time.time() < deadline, registry.store.get_job(job_id)
        time.sleep(0.05)


@pytest.mark.slow
def test_a_session_cannot_queue_a_second_job_and_fresh_sessions_of_one_address_hold_two(shared_app):
    url, registry = shared_app
    before = len(registry.store.jobs())
    ana = session(url)
    first = queued(ana)
    assert "of yours is still queued or running: cancel it, or wait for it to end" in \
        error_of(lambda: ana.predict(*FORM, api_name="/train"))
    strangers = [session(url) for _ in range(5)]  # a new maker each, all from this machine's address
    second = queued(strangers[0])
    for stranger in strangers[1:]:
        assert "2 training jobs from your address are queued or running, the most one address may have here" in \
            error_of(lambda s=stranger: s.predict(*FORM, api_name="/train"))
    assert {j["id"] for j in registry.store.jobs()[:len(registry.store.jobs()) - before]} == {first, second}
    end(registry, [ana, strangers[0]])
    again = strangers[1]  # the slots came back with the jobs' ends
    queued(again)
    end(registry, [again])


@pytest.mark.slow
def test_sessions_from_many_addresses_fill_no_more_than_the_waiting_cap(shared_app):
    url, registry = shared_app
    clients = [session(url, f"198.51.100.{n}") for n in range(10)]
    first = queued(clients[0])
    running(registry, first)
    taken = [queued(client) for client in clients[1:9]]  # one running, eight waiting
    assert len(set(taken)) == 8
    assert "8 training jobs are waiting already, the most the queue takes; try again later" in \
        error_of(lambda: clients[9].predict(*FORM, api_name="/train"))
    end(registry, clients[:9])


@pytest.mark.slow
def test_ten_thousand_epochs_and_work_past_the_ceiling_are_refused_by_the_librarys_own_check(shared_app):
    url, registry = shared_app
    before = len(registry.store.jobs())
    client = session(url)
    for endpoint in ("/train", "/train_on_judged"):
        assert "epochs must be between 1 and 100, not 10000" in \
            error_of(lambda e=endpoint: client.predict("triplet", "bm25", 10_000, *FORM[3:], api_name=e))
    asks = (*FORM[:2], 5, 64, 1e-3, 32, 1_000_000, *FORM[7:])  # 1,000,000 steps of 64 a epoch
    assert "this training asks for up to 640,000,000 examples" in error_of(lambda: client.predict(*asks,
                                                                                                    api_name="/train"))
    wide = (*FORM[:3], 1024, 1e-3, 8192, *FORM[6:])
    assert "batch size × max sequence length is at most 262,144" in error_of(lambda: client.predict(*wide,
                                                                                                   api_name="/train"))
    assert len(registry.store.jobs()) == before
