"""``bench/judge_speed.py``'s streamed caller: a real Gradio app called as its page calls it returns
what ``gradio_client`` returns (defaults filled in, state slots skipped), and an endpoint that fails
is an error, not a value."""
from __future__ import annotations

import pytest

from tests.conftest import bench_module

pytestmark = pytest.mark.bench


@pytest.fixture(scope="module")
def app():
    import gradio as gr

    def count(text, times, seen):
        if text == "fail":
            raise gr.Error("asked to fail")
        seen = (seen or 0) + 1
        return text * int(times), seen, {"seen": seen, "text": text}

    with gr.Blocks() as blocks:
        box, times, seen = gr.Textbox(), gr.Number(value=2), gr.State(0)
        out, shown = gr.Textbox(), gr.JSON()
        gr.Button().click(count, [box, times, seen], [out, seen, shown], api_name="count")
    blocks.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True)
    yield blocks
    blocks.close()


def test_the_streamed_caller_returns_what_gradio_client_returns(app):
    from tests.helpers import app_client

    streamed = bench_module("judge_speed").Streamed(app.local_url)
    try:
        client = app_client(app.local_url)
        for args in (("ab",), ("ab", 3), ("", 1)):
            assert streamed.predict(*args, api_name="/count") == client.predict(*args, api_name="/count")
        assert streamed.predict("x", 4, api_name="/count")[0] == "xxxx"
    finally:
        streamed.close()


def test_a_failing_endpoint_is_an_error(app):
    streamed = bench_module("judge_speed").Streamed(app.local_url)
    try:
        with pytest.raises(RuntimeError, match="/count failed"):
            streamed.predict("fail", api_name="/count")
        assert streamed.predict("ok", 1, api_name="/count")[0] == "ok"  # the session goes on
    finally:
        streamed.close()
