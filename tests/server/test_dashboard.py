"""The dashboard in a real browser (Debian's Chromium driven by Playwright) against a real
``stead serve --worker``: approve a gated refund from the inbox, watch streamed text arrive,
cancel a run whose tool sleeps in a child process, filter the runs list, fit a phone. The
screenshots in docs/screenshots/ are saved by these tests (``make screenshots``)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _agents import STREAM_REPLIES, STREAM_TEXT
from _stack import (
    HERE,
    SECRET,
    STEAD,
    Stack,
    _env,
    group_gone,
    sse_messages,
    tool_group,
    wait_for,
)

from _wait import until

playwright = pytest.importorskip("playwright.sync_api")

# The module's stack (`stead demo`, a crash child, `stead serve --worker`, Chromium) is set
# up inside its first test's timeout: 97 s of the default 120 beside three other xdist
# workers on a loaded machine.
pytestmark = pytest.mark.timeout(240)

CHROMIUM = os.environ.get("STEAD_TEST_CHROMIUM", "/usr/bin/chromium")
DOCS_SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
# `make screenshots` (STEAD_UPDATE_SCREENSHOTS=1) writes them into docs/; otherwise they go
# to a temporary folder, so a test run leaves the checkout as it was.
UPDATE = os.environ.get("STEAD_UPDATE_SCREENSHOTS") == "1"
SHOTS = DOCS_SHOTS if UPDATE else Path(tempfile.mkdtemp(prefix="stead-shots-"))
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    folder = tmp_path_factory.mktemp("dash")
    store = f"sqlite:///{folder / 'runs.db'}"
    # A run that lived through a crash: `stead demo` kills its worker after a side effect.
    # (A child process: Playwright's sync API holds this thread's event loop.)
    demo = subprocess.run(
        [*STEAD, "demo", "--db", str(folder / "runs.db")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    # A worker that dies while a charge is in flight leaves a question for a person.
    crash = subprocess.run(
        [sys.executable, str(HERE / "_crash_child.py"), store, "run_charge", "charger"],
        env={**_env(folder), "STEAD_CRASH_AT": "after_tool_started:charge_card"},
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert crash.returncode == -signal.SIGKILL, crash.stderr
    os.environ["STEAD_TEST_STREAM_DELAY"] = "0.08"  # slow enough to watch it arrive
    try:
        s = Stack(store, folder)
        s.serve("--worker", "--poll", "0.1")
    finally:
        os.environ.pop("STEAD_TEST_STREAM_DELAY", None)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not shutil.which(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"no Chromium at {CHROMIUM}; `make test` installs Debian's chromium")
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    # launch() gives the browser a fresh profile directory of its own each time.
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: object, stack: Stack) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})  # type: ignore[attr-defined]
    pg = context.new_page()
    said: list[str] = []  # what the page logged and threw: shown with a failing test's output
    pg.on("console", lambda m: said.append(f"console.{m.type}: {m.text}"))
    pg.on("pageerror", lambda e: said.append(f"error: {e}"))
    pg.on("requestfailed", lambda r: said.append(f"request failed: {r.method} {r.url}"))
    pg.set_default_timeout(20_000)
    pg.goto(f"{stack.url}/#token={SECRET}")
    pg.wait_for_selector("#runs")
    try:
        yield pg
    finally:
        # Captured, so printed only when the test failed: where the page was and what it said.
        print(f"page at {pg.url}", *said, sep="\n")
        with contextlib.suppress(Exception):
            print("page text:", pg.inner_text("main", timeout=2_000)[:2_000])
        context.close()


def _api(stack: Stack) -> httpx.Client:
    assert stack.client is not None
    return stack.client


def _start(stack: Stack, agent: str, text: str) -> str:
    r = _api(stack).post("/runs", json={"agent": agent, "input": text})
    assert r.status_code == 201, r.text
    return str(r.json()["run_id"])


def _shot(page: object, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    if page.locator("#waterfall-box").count():  # type: ignore[attr-defined]  # a run's page
        page.wait_for_selector("#waterfall", state="attached")  # type: ignore[attr-defined]
    page.screenshot(path=str(SHOTS / name), full_page=True)  # type: ignore[attr-defined]
    assert (SHOTS / name).read_bytes().startswith(b"\x89PNG")


def test_the_token_leaves_the_address_bar(page: object) -> None:
    assert "token" not in page.url  # type: ignore[attr-defined]


def test_approve_a_gated_refund_from_the_inbox(stack: Stack, page: object) -> None:
    run_id = _start(stack, "refunds", "Customer 42 wants their $250 back.")
    wait_for(_api(stack), run_id, "awaiting_approval")
    page.goto(f"{stack.url}/#/inbox")  # type: ignore[attr-defined]
    card = page.locator(f'.approval[data-run="{run_id}"]')  # type: ignore[attr-defined]
    card.wait_for()
    assert "refund" in card.inner_text() and "non idempotent" in card.inner_text()
    # A first check in the page: edited arguments that do not fit the schema are refused.
    card.locator(".edit-btn").click()
    card.locator("textarea.edit").fill('{"order_id": "forty-two", "cents": 25000}')
    card.locator(".approve").click()
    assert "order_id must be integer" in card.locator(".error-box").inner_text()
    card.locator(".edit-btn").click()  # back to the arguments as asked
    card.locator(".approve").click()
    page.wait_for_selector(f'.approval[data-run="{run_id}"]', state="detached")  # type: ignore[attr-defined]
    page.goto(f"{stack.url}/#/runs/{run_id}")  # type: ignore[attr-defined]
    page.wait_for_selector("#run-status >> text=completed")  # type: ignore[attr-defined]
    page.wait_for_selector('#timeline li[data-kind="run_completed"]')  # type: ignore[attr-defined]
    timeline = page.locator("#timeline").inner_text()  # type: ignore[attr-defined]
    assert "approve by alice" in timeline
    assert "Refunded order 42." in page.locator("#run-output").inner_text()  # type: ignore[attr-defined]
    assert (
        page.locator("#run-output").evaluate("e => getComputedStyle(e).fontFamily").find("mono") < 0
    )  # type: ignore[attr-defined]
    taken = page.locator("#diagram .edge.taken").count()  # type: ignore[attr-defined]
    assert taken >= 3  # queued → running → awaiting_approval → ... → completed
    assert page.locator('#diagram .node.current[data-state="completed"]').count() == 1  # type: ignore[attr-defined]
    _shot(page, "run.png")


def test_watch_streamed_text_arrive(stack: Stack, page: object) -> None:
    run_id = _start(stack, "streamer", "What is the refund policy?")
    page.goto(f"{stack.url}/#/runs/{run_id}")  # type: ignore[attr-defined]
    live = page.locator("#live-text")  # type: ignore[attr-defined]
    live.wait_for(state="visible")
    first = live.text_content()
    # The grown text as the page held it when it grew: read again afterwards, the preview may
    # already be gone (its reply recorded, the box emptied).
    later = page.wait_for_function(  # type: ignore[attr-defined]
        "n => { const t = document.getElementById('live-text').textContent;"
        " return t.length > n ? t : false; }",
        arg=len(first),
    ).json_value()
    # A preview of one of the model's replies: a page that a loaded machine shows late may
    # first see the second call's (its text then grows from there).
    assert any(reply.startswith(later) for reply in STREAM_REPLIES), later
    assert len(later) > len(first)
    page.wait_for_selector('#timeline li[data-kind="run_completed"]')  # type: ignore[attr-defined]
    replies = page.locator("#timeline .reply").all_inner_texts()  # type: ignore[attr-defined]
    assert replies[0] == STREAM_TEXT  # the durable reply replaced the preview
    assert not live.is_visible()


def test_answer_whether_a_call_happened_from_the_inbox(stack: Stack, page: object) -> None:
    wait_for(_api(stack), "run_charge", "awaiting_approval")  # after the dead worker's lease
    page.goto(f"{stack.url}/#/inbox")  # type: ignore[attr-defined]
    card = page.locator('.approval[data-run="run_charge"]')  # type: ignore[attr-defined]
    card.wait_for()
    assert "outcome unknown" in card.inner_text()
    card.locator("textarea.result").fill('{"charged": 500, "receipt": "R-77"}')
    card.get_by_role("button", name="It happened").click()
    card.wait_for(state="detached")
    run = wait_for(_api(stack), "run_charge", "completed")
    assert run["output"] == "Charged."
    events = _api(stack).get("/runs/run_charge/events").json()
    (result,) = [e for e in events if e["kind"] == "tool_result_recorded"]
    assert "R-77" in result["data"]["content"]
    assert [e["kind"] for e in events].count("tool_call_started") == 1  # charged once


def test_answer_a_question_from_the_inbox(stack: Stack, page: object) -> None:
    """A question tool's call waits in the inbox with its question and answer
    schema; an answer that does not fit is refused in the card; one that fits continues."""
    run_id = _start(stack, "asker", "Ship my order")
    wait_for(_api(stack), run_id, "awaiting_approval")
    page.goto(f"{stack.url}/#/inbox")  # type: ignore[attr-defined]
    card = page.locator(f'.approval[data-run="{run_id}"]')  # type: ignore[attr-defined]
    card.wait_for()
    text = card.inner_text()
    assert "asks you a question" in text and "Standard or express?" in text
    assert "read only" not in text  # a question, not a read-only tool call
    # The answer type in words, not the schema object printed as "[object Object]".
    assert card.locator(".answer-type").inner_text() == 'Answer: one of: "standard", "express"'
    assert "[object Object]" not in page.locator("#main").inner_text()  # type: ignore[attr-defined]
    _shot(page, "inbox.png")
    page.set_viewport_size({"width": 390, "height": 844})  # type: ignore[attr-defined]
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # type: ignore[attr-defined]
    _shot(page, "inbox-phone.png")
    page.set_viewport_size({"width": 1200, "height": 900})  # type: ignore[attr-defined]
    # The run's own page shows the same card, with the same answer type.
    page.goto(f"{stack.url}/#/runs/{run_id}")  # type: ignore[attr-defined]
    on_run = page.locator(
        f'#run-approvals .approval[data-call="{card.get_attribute("data-call")}"]'
    )  # type: ignore[attr-defined]
    assert on_run.locator(".answer-type").inner_text() == 'Answer: one of: "standard", "express"'
    assert "[object Object]" not in page.locator("#main").inner_text()  # type: ignore[attr-defined]
    page.goto(f"{stack.url}/#/inbox")  # type: ignore[attr-defined]
    card.locator("textarea.answer").fill("by pigeon")
    card.locator(".answer-btn").click()
    # The refusal arrives with the API's answer: wait for it, do not read the box at once.
    card.locator('.error-box:has-text("does not fit")').wait_for()
    card.locator("textarea.answer").fill("express")
    card.locator(".answer-btn").click()
    card.wait_for(state="detached")
    run = wait_for(_api(stack), run_id, "completed")
    assert run["output"] == "Shipping express."
    page.goto(f"{stack.url}/#/runs/{run_id}")  # type: ignore[attr-defined]
    page.wait_for_selector('#timeline li[data-kind="run_completed"]')  # type: ignore[attr-defined]
    timeline = page.locator("#timeline").inner_text()  # type: ignore[attr-defined]
    assert 'question "Standard or express?"' in timeline and "answer by alice" in timeline
    # A question and its answer, not a read-only tool call and its result.
    assert "answer: express" in timeline and "call ask_user" not in timeline
    assert "read only" not in timeline


def test_the_stream_carries_provisional_text_when_the_server_drives_the_run(
    stack: Stack,
) -> None:
    run_id = _start(stack, "streamer", "What is the refund policy?")
    frames: list[dict[str, object]] = []
    sse = {"Accept": "text/event-stream"}
    with _api(stack).stream("GET", f"/runs/{run_id}/events", headers=sse) as r:
        for msg in sse_messages(r.iter_lines()):
            if msg.get("event") == "progress":
                frames.append(json.loads(msg["data"]))
            if msg.get("event") == "event" and '"assistant_message"' in msg["data"]:
                break  # the durable reply of the first turn
    assert frames, "no provisional text came before the first reply"
    # Only the first turn's text: a later turn's comes after its start, after this reply.
    assert {f["turn_index"] for f in frames} == {0}
    assert {f["generation"] for f in frames} == {frames[0]["generation"]}
    sequences = [f["sequence"] for f in frames]
    assert sequences == sorted(sequences) and not any(f["gap"] for f in frames)
    text = "".join(str(f["text"]) for f in frames)
    assert STREAM_TEXT.startswith(text) and len(text) > len(STREAM_TEXT) // 2


def test_cancel_a_run_whose_tool_sleeps_and_see_its_process_group_gone(
    stack: Stack, page: object
) -> None:
    run_id = _start(stack, "sleeper", "Take a nap.")
    pidfile = stack.piddir / run_id
    pgid = tool_group(pidfile)
    os.killpg(pgid, 0)  # sleep 60 is running
    page.goto(f"{stack.url}/#/runs/{run_id}")  # type: ignore[attr-defined]
    # The page has caught up with the run (its timeline replayed): the click is not made
    # on a header that the replay's refreshes are still re-rendering.
    page.wait_for_selector('#timeline li[data-kind="tool_call_requested"]')  # type: ignore[attr-defined]
    page.locator("#cancel").click()  # type: ignore[attr-defined]
    # The worker's part (hear the request, stop the tool's group after its grace, record)
    # gets the API's patience on a loaded machine; then the page has its own to show it.
    wait_for(_api(stack), run_id, "cancelled", timeout=60)
    page.wait_for_selector("#run-status >> text=cancelled")  # type: ignore[attr-defined]
    until(lambda: group_gone(pgid), "sleep 60 gone after the cancel", timeout=10)
    assert page.locator("#resume").is_visible()  # type: ignore[attr-defined]


def test_a_run_that_survived_a_crash_says_so_plainly(stack: Stack, page: object) -> None:
    (demo,) = _api(stack).get("/runs", params={"agent": "order-notifier"}).json()["runs"]
    page.goto(f"{stack.url}/#/runs/{demo['run_id']}")  # type: ignore[attr-defined]
    page.wait_for_selector('#timeline li[data-kind="run_completed"]')  # type: ignore[attr-defined]
    recovery = page.locator("#timeline li.recovery").all_inner_texts()  # type: ignore[attr-defined]
    text = "\n".join(recovery)
    assert "recovered:" in text and "took over from" in text
    assert "reconciled" in text and "it had happened" in text
    # What the takeover did with the dead worker's call, in words, not its event's fields.
    assert "the dead worker's call call_1_0: no executor has it: its outcome is unknown" in text
    assert '"verdict"' not in page.locator("#timeline").inner_text()  # type: ignore[attr-defined]
    sources = page.locator('#timeline li[data-kind="tool_result_recorded"] .badge')  # type: ignore[attr-defined]
    assert "reconciled" in sources.all_inner_texts()
    _shot(page, "run-recovered.png")


def test_a_structured_answer_shows_as_the_runs_data(stack: Stack, page: object) -> None:
    run_id = _start(stack, "typed", "Where is the Eiffel tower?")
    wait_for(_api(stack), run_id, "completed")
    page.goto(f"{stack.url}/#/runs/{run_id}")  # type: ignore[attr-defined]
    shown = page.wait_for_selector("#run-data").inner_text()  # type: ignore[attr-defined]
    assert json.loads(shown) == {"city": "Paris", "zip": "75007"}
    # The output tool's call is the typed answer, shown as its fields.
    page.wait_for_selector("#timeline li.output >> text=the typed answer")  # type: ignore[attr-defined]
    timeline = page.locator("#timeline").inner_text()  # type: ignore[attr-defined]
    assert "call final_result" not in timeline and "Paris" in timeline


def test_a_deep_link_opens_the_run(stack: Stack, browser: object) -> None:
    """A link with the token in its fragment opens the run it names, in a fresh browser,
    and the token leaves the address bar while the route stays."""
    run_id = _start(stack, "lookup", "Where is order 7?")
    context = browser.new_context(viewport={"width": 1200, "height": 900})  # type: ignore[attr-defined]
    try:
        pg = context.new_page()
        pg.goto(f"{stack.url}/#/runs/{run_id}?token={SECRET}")
        assert pg.wait_for_selector("h1 .id").inner_text() == run_id
        assert "token" not in pg.url and pg.url.endswith(f"#/runs/{run_id}")
        pg.goto(f"{stack.url}/#token={SECRET}&/runs/{run_id}")
        pg.wait_for_function("id => location.hash === '#/runs/' + id", arg=run_id)
        assert pg.wait_for_selector("h1 .id").inner_text() == run_id
    finally:
        context.close()


def test_a_long_run_shows_a_line_a_turn_and_jumps_to_one(
    stack: Stack, page: object, browser: object
) -> None:
    run_id = _start(stack, "long", "Check fifty orders.")
    wait_for(_api(stack), run_id, "completed")
    page.goto(f"{stack.url}/#/runs/{run_id}")  # type: ignore[attr-defined]
    page.wait_for_selector('#timeline li[data-kind="run_completed"]')  # type: ignore[attr-defined]
    assert page.locator("#timeline li.turn-block").count() == 51  # type: ignore[attr-defined]
    assert page.locator("#timeline li.turn-block details[open]").count() == 1  # type: ignore[attr-defined]
    # Collapsed, a turn is one line: the page is a few screens, not 18,864 px.
    height = page.evaluate("document.documentElement.scrollHeight")  # type: ignore[attr-defined]
    assert height < 51 * 50 + 1500, height
    # The answer at the top, once; the live text's place is above the timeline.
    assert page.locator("#run-output").inner_text() == "All fifty orders have shipped."  # type: ignore[attr-defined]
    assert page.locator("text=All fifty orders have shipped.").count() == 2  # type: ignore[attr-defined]  # the answer, and the last turn's reply
    line = page.locator("#turn-12 summary").inner_text()  # type: ignore[attr-defined]
    assert "Turn 12" in line and "model" in line and "lookup_order" in line
    # The waterfall: a row a step (51 model calls, 50 lookups), drawn from the whole run.
    page.wait_for_function(  # type: ignore[attr-defined]
        "() => document.querySelectorAll('#waterfall .wf-row').length === 101"
    )
    assert page.locator('#waterfall .wf-row[data-kind="model"]').count() == 51  # type: ignore[attr-defined]
    _shot(page, "run-long.png")
    # A row's label opens its turn.
    page.locator('#waterfall .wf-row[data-turn="20"] .wf-label').first.click()  # type: ignore[attr-defined]
    page.locator("#turn-20 details[open]").wait_for()  # type: ignore[attr-defined]  # its turn, opened
    page.fill("#jump", "37")  # type: ignore[attr-defined]
    page.press("#jump", "Enter")  # type: ignore[attr-defined]
    turn = page.locator("#turn-37")  # type: ignore[attr-defined]
    turn.locator("details[open]").wait_for()
    assert "Looking at order 37." in turn.inner_text()
    top = turn.evaluate("e => e.getBoundingClientRect().top")
    assert 0 <= top < 900, top  # scrolled to it
    assert page.url.endswith("?turn=37")  # type: ignore[attr-defined]
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)  # type: ignore[attr-defined]
    try:
        small = phone.new_page()
        small.goto(f"{stack.url}/#/runs/{run_id}?turn=5&token={SECRET}")
        small.locator("#turn-5 details[open]").wait_for()
        assert small.evaluate("document.documentElement.scrollWidth") <= 390
        _shot(small, "run-long-phone.png")
    finally:
        phone.close()


def test_runs_list_filters_and_fits_a_phone(stack: Stack, page: object, browser: object) -> None:
    # Its own runs, a cancelled one among them: under xdist the module's other tests (whose
    # runs it counted on, the cancelled one included) may run on another worker's stack.
    api = _api(stack)
    wait_for(api, _start(stack, "lookup", "Where is order 7?"), "completed")
    napping = _start(stack, "sleeper", "Take a nap.")
    cancel = api.post(f"/runs/{napping}/cancel", json={"reason": "for the filter"})
    assert cancel.status_code == 200, cancel.text
    wait_for(api, napping, "cancelled")
    listed = len(api.get("/runs", params={"limit": 50}).json()["runs"])  # the page's first 50
    page.goto(f"{stack.url}/#/runs")  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        "n => document.querySelectorAll('#runs tbody tr').length >= n", arg=listed
    )
    _shot(page, "runs.png")
    # Search: a word of a run's input finds it (and the list shows input and answer).
    found = _start(stack, "lookup", "Is the parcel for Ingrid on its way?")
    wait_for(api, found, "completed")
    page.fill("#q", "ingrid")  # type: ignore[attr-defined]
    page.press("#q", "Enter")  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        "id => { const rows = document.querySelectorAll('#runs tbody tr');"
        " return rows.length === 1 && rows[0].dataset.run === id; }",
        arg=found,
    )
    row = page.locator(f'#runs tr[data-run="{found}"]').inner_text()  # type: ignore[attr-defined]
    assert "Is the parcel for Ingrid on its way?" in row and "Order 7 has shipped." in row
    page.fill("#q", found[:8])  # type: ignore[attr-defined]  # an id prefix
    page.press("#q", "Enter")  # type: ignore[attr-defined]
    page.wait_for_selector(f'#runs tr[data-run="{found}"]')  # type: ignore[attr-defined]
    page.fill("#q", "")  # type: ignore[attr-defined]
    page.press("#q", "Enter")  # type: ignore[attr-defined]
    page.select_option("#f-status", "cancelled")  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        "() => [...document.querySelectorAll('#runs tbody tr')].length > 0 && "
        "[...document.querySelectorAll('#runs tbody .badge')]"
        ".every(b => b.textContent === 'cancelled')"
    )
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)  # type: ignore[attr-defined]
    small = phone.new_page()
    small.goto(f"{stack.url}/#token={SECRET}")
    small.wait_for_selector("#runs tbody tr")
    assert small.evaluate("document.documentElement.scrollWidth") <= 390
    _shot(small, "runs-phone.png")
    small.goto(f"{stack.url}/#/runs/{napping}")
    small.wait_for_selector('#timeline li[data-kind="run_cancelled"]')
    assert small.evaluate("document.documentElement.scrollWidth") <= 390
    _shot(small, "run-phone.png")
    phone.close()


def test_fork_a_run_after_a_turn_and_follow_its_lineage(stack: Stack, page: object) -> None:
    run_id = _start(stack, "lookup", "Where is order 7?")
    wait_for(_api(stack), run_id, "completed")
    page.goto(f"{stack.url}/#/runs/{run_id}")  # type: ignore[attr-defined]
    page.wait_for_selector('#timeline li[data-kind="run_completed"]')  # type: ignore[attr-defined]
    page.once("dialog", lambda dialog: dialog.accept("And order 8?"))  # type: ignore[attr-defined]
    page.locator('#timeline button.fork[data-turn="0"]').click()  # type: ignore[attr-defined]
    forked = page.locator('#timeline li[data-kind="run_forked"]')  # type: ignore[attr-defined]
    forked.wait_for()
    assert "after turn 1 (1 results carried)" in forked.inner_text()
    fork_id = page.evaluate("decodeURIComponent(location.hash.split('/').pop())")  # type: ignore[attr-defined]
    assert fork_id != run_id
    page.wait_for_selector('#timeline li[data-kind="run_completed"]')  # type: ignore[attr-defined]
    forked.locator("a").click()  # back to the source
    page.wait_for_function(  # type: ignore[attr-defined]
        "id => location.hash.endsWith(encodeURIComponent(id))", arg=run_id
    )


def test_the_chat_view_sends_a_message_a_worker_answers(
    stack: Stack, page: object, browser: object
) -> None:
    """A conversation's chat view: the message goes to the workers (the server's own
    worker here), the answer appears in the page as soon as the run rests; the run's page
    shows the messages before it."""
    page.goto(f"{stack.url}/#/chat/chat-dash-1")  # type: ignore[attr-defined]
    page.wait_for_selector("#chat >> text=No messages yet")  # type: ignore[attr-defined]
    page.select_option("#chat-agent", "chatty")  # type: ignore[attr-defined]
    page.fill("#chat-input", "Hello there")  # type: ignore[attr-defined]
    page.click("#chat-send")  # type: ignore[attr-defined]
    page.wait_for_selector(".bubble.agent >> text=You said: Hello there")  # type: ignore[attr-defined]
    assert page.locator("#chat-agent").is_hidden()  # type: ignore[attr-defined]  # it is chatty's now
    page.fill("#chat-input", "And again")  # type: ignore[attr-defined]
    page.click("#chat-send")  # type: ignore[attr-defined]
    page.wait_for_selector(".bubble.agent >> text=You said: And again")  # type: ignore[attr-defined]
    assert page.locator("#chat .chat-turn").count() == 2  # type: ignore[attr-defined]
    _shot(page, "conversation.png")
    second = page.locator('#chat .chat-turn[data-position="1"]').get_attribute("data-run")  # type: ignore[attr-defined]
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)  # type: ignore[attr-defined]
    try:
        small = phone.new_page()
        small.goto(f"{stack.url}/#/chat/chat-dash-1?token={SECRET}")
        small.wait_for_selector(".bubble.agent >> text=You said: And again")
        assert small.evaluate("document.documentElement.scrollWidth") <= 390
        _shot(small, "conversation-phone.png")
        small.goto(f"{stack.url}/#/runs/{second}")
        small.locator("#earlier summary").click()
        assert "You said: Hello there" in small.locator("#earlier").inner_text()
    finally:
        phone.close()


def test_cancel_the_selected_runs_from_the_list(stack: Stack, page: object) -> None:
    api = _api(stack)
    waiting = [_start(stack, "refunds", f"Quokka refund {n}") for n in (1, 2)]
    done = _start(stack, "lookup", "Quokka lookup")
    for run_id in waiting:
        wait_for(api, run_id, "awaiting_approval")
    wait_for(api, done, "completed")
    page.goto(f"{stack.url}/#/runs?q=quokka")  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        "() => document.querySelectorAll('#runs tbody tr').length === 3"
    )
    # A finished run cannot be cancelled: it has nothing to tick.
    assert page.locator(f'#runs tr[data-run="{done}"] input[type=checkbox]').count() == 0  # type: ignore[attr-defined]
    for run_id in waiting:
        page.locator(f'#runs tr[data-run="{run_id}"] input[type=checkbox]').check()  # type: ignore[attr-defined]
    button = page.locator("#cancel-selected")  # type: ignore[attr-defined]
    assert button.inner_text() == "Cancel selected (2)"
    button.click()
    for run_id in waiting:
        wait_for(api, run_id, "cancelled")
    page.wait_for_function(  # type: ignore[attr-defined]
        "ids => ids.every(id => document.querySelector(`#runs tr[data-run='${id}'] .badge`)"
        "?.textContent === 'cancelled')",
        arg=waiting,
    )
    assert button.is_disabled() and button.inner_text() == "Cancel selected"
    assert api.get(f"/runs/{done}").json()["status"] == "completed"  # the unticked one


def test_start_a_run_from_the_form(stack: Stack, page: object) -> None:
    page.goto(f"{stack.url}/#/runs")  # type: ignore[attr-defined]
    page.click("#start summary")  # type: ignore[attr-defined]
    page.wait_for_selector('#start-agent option[value="lookup"]', state="attached")  # type: ignore[attr-defined]
    page.select_option("#start-agent", "lookup")  # type: ignore[attr-defined]
    page.fill("#start-input", "Where is order 7? (from the form)")  # type: ignore[attr-defined]
    page.fill("#start-conversation", "form-conversation")  # type: ignore[attr-defined]
    page.click('#start button[type="submit"]')  # type: ignore[attr-defined]
    page.wait_for_function("() => location.hash.startsWith('#/runs/run_')")  # type: ignore[attr-defined]
    run_id = page.evaluate("decodeURIComponent(location.hash.slice('#/runs/'.length))")  # type: ignore[attr-defined]
    run = wait_for(_api(stack), run_id, "completed")
    assert run["agent"] == "lookup" and run["input"] == "Where is order 7? (from the form)"
    assert run["session_id"] == "form-conversation"
    page.wait_for_selector("#run-output >> text=Order 7 has shipped.")  # type: ignore[attr-defined]
    assert page.locator("#run-chat").inner_text() == "form-conversation"  # type: ignore[attr-defined]


def test_the_time_range_keeps_the_runs_created_in_it(stack: Stack, page: object) -> None:
    api = _api(stack)
    newest = _start(stack, "lookup", "Where is order 7? (for the time range)")
    wait_for(api, newest, "completed")
    since = int(api.get(f"/runs/{newest}").json()["created_at"])
    runs = api.get("/runs", params={"limit": 200}).json()["runs"]
    older = {r["run_id"] for r in runs if r["created_at"] < since}
    assert older  # the module's first runs (the demo's, the crashed charge)
    page.goto(f"{stack.url}/#/runs?from={since}")  # type: ignore[attr-defined]
    page.wait_for_selector(f'#runs tr[data-run="{newest}"]')  # type: ignore[attr-defined]
    shown = page.eval_on_selector_all("#runs tbody tr", "rows => rows.map(r => r.dataset.run)")  # type: ignore[attr-defined]
    assert not older & set(shown), older & set(shown)
    assert page.input_value("#f-from")  # type: ignore[attr-defined]  # the range, in the form
    # A range that ends before anything was created: nothing, said in words.
    page.fill("#f-until", "2001-01-01T00:00")  # type: ignore[attr-defined]
    page.wait_for_function("() => location.hash.includes('until=')")  # type: ignore[attr-defined]
    page.wait_for_selector("#runs-empty >> text=No runs match.")  # type: ignore[attr-defined]
    assert page.locator("#runs tbody tr").count() == 0  # type: ignore[attr-defined]


def test_resume_is_offered_only_where_it_can_succeed(stack: Stack, page: object) -> None:
    api = _api(stack)
    spent = _start(stack, "spender", "Spend it all")
    wait_for(api, spent, "failed")
    page.goto(f"{stack.url}/#/runs/{spent}")  # type: ignore[attr-defined]
    refusal = page.wait_for_selector("#no-resume").inner_text()  # type: ignore[attr-defined]
    assert refusal.startswith("Not resumable: it spent its budget"), refusal
    assert page.locator("#resume").count() == 0  # type: ignore[attr-defined]
    assert "budget exceeded" in page.locator("#run-error").inner_text()  # type: ignore[attr-defined]
    # A cancelled run can go on: the button is there, and it requeues the run.
    stopped = _start(stack, "refunds", "Customer 43 wants their $250 back.")
    wait_for(api, stopped, "awaiting_approval")
    assert api.post(f"/runs/{stopped}/cancel", json={"reason": "by mistake"}).status_code == 200
    wait_for(api, stopped, "cancelled")
    page.goto(f"{stack.url}/#/runs/{stopped}")  # type: ignore[attr-defined]
    page.wait_for_selector("#run-status >> text=cancelled")  # type: ignore[attr-defined]
    assert page.locator("#no-resume").count() == 0  # type: ignore[attr-defined]
    page.locator("#resume").click()  # type: ignore[attr-defined]
    # Requeued, and driven on by the server's worker (the cancelled call's result is an error
    # the model reads).
    wait_for(api, stopped, "completed")
    page.wait_for_selector("#run-status >> text=completed")  # type: ignore[attr-defined]


def test_the_waterfall_puts_every_step_on_one_time_axis(stack: Stack, page: object) -> None:
    """A row a model call and a row a tool call, each bar where its step started and as
    long as it took on the run's time axis; the time a run waited on a person in the list."""
    api = _api(stack)
    run_id = _start(stack, "refunds", "Customer 44 wants their $250 back.")
    wait_for(api, run_id, "awaiting_approval")
    (pending,) = api.get(f"/runs/{run_id}").json()["approvals"]
    approved = api.post(
        f"/runs/{run_id}/approvals/{pending['tool_call_id']}/approve", json={"reason": "ok"}
    )
    assert approved.status_code == 200, approved.text
    wait_for(api, run_id, "completed")
    steps = api.get(f"/runs/{run_id}/steps").json()
    page.goto(f"{stack.url}/#/runs/{run_id}")  # type: ignore[attr-defined]
    page.wait_for_selector('#timeline li[data-kind="run_completed"]')  # type: ignore[attr-defined]
    page.wait_for_selector("#waterfall .wf-row")  # type: ignore[attr-defined]
    rows = page.eval_on_selector_all(  # type: ignore[attr-defined]
        "#waterfall .wf-row",
        """rows => rows.map(r => { const t = r.querySelector('.wf-track').getBoundingClientRect();
           const b = r.querySelector('.wf-bar').getBoundingClientRect();
           return { kind: r.dataset.kind, start: Number(r.dataset.start),
                    end: Number(r.dataset.end), trackX: t.left, trackW: t.width,
                    left: b.left - t.left, width: b.width }; })""",
    )
    # The model's two turns and the refund between them: three steps, three rows.
    assert [r["kind"] for r in rows] == ["model", "person", "model"]
    t0 = steps["created_at"]
    span = steps["ended_at"] - t0
    (first, second) = steps["turns"]
    (refund,) = first["calls"]
    expected = [
        (first["started_at"], first["started_at"] + first["model_s"]),
        (refund["requested_at"], refund["ended_at"]),  # asked, waited, ran
        (second["started_at"], second["started_at"] + second["model_s"]),
    ]
    for row, (start, end) in zip(rows, expected, strict=True):
        assert row["trackX"] == rows[0]["trackX"] and row["trackW"] == rows[0]["trackW"]
        assert abs(row["start"] - (start - t0)) < 1e-6 and abs(row["end"] - (end - t0)) < 1e-6
        # Placed on the axis by its times (a bar is at least 2 px wide, to be seen).
        assert abs(row["left"] - row["trackW"] * (start - t0) / span) <= 1.5, (row, start)
        assert abs(row["width"] - max(2, row["trackW"] * (end - start) / span)) <= 1.5, row
    assert rows[1]["left"] + rows[1]["width"] <= rows[2]["left"] + 1.5  # one after the other
    summary = page.locator("#waterfall summary").inner_text()  # type: ignore[attr-defined]
    assert "of it waiting on a person" in summary
    # The list says how long the finished run waited on a person, in all.
    listed = {r["run_id"]: r for r in api.get("/runs", params={"limit": 200}).json()["runs"]}
    assert listed[run_id]["waited_s"] == steps["waited_s"] > 0
    page.goto(f"{stack.url}/#/runs?q={run_id[:16]}")  # type: ignore[attr-defined]
    waited = page.wait_for_selector(f'#runs tr[data-run="{run_id}"] .waited').inner_text()  # type: ignore[attr-defined]
    assert waited.strip().startswith("waited ")


def test_the_run_tree_links_a_parent_and_its_child(stack: Stack, page: object) -> None:
    """A parent whose call ran as a child run: its page shows the tree (both runs, their
    states and tokens), the child's link opens the child, whose page names its parent, and
    that link leads back."""
    run_id = _start(stack, "delegator", "Where is order 9?")
    done = wait_for(_api(stack), run_id, "completed")
    assert done["output"] == "The helper says: Order 9 has shipped."
    tree = _api(stack).get(f"/runs/{run_id}/tree").json()
    (child,) = tree["root"]["children"]
    assert tree["parents"] == [] and child["agent"] == "helper"
    assert child["status"] == "completed" and child["usage"]["output_tokens"] > 0
    page.goto(f"{stack.url}/#/runs/{run_id}")  # type: ignore[attr-defined]
    shown = page.wait_for_selector(f'#tree li[data-run="{child["run_id"]}"]')  # type: ignore[attr-defined]
    assert "helper" in shown.inner_text() and "completed" in shown.inner_text()
    assert page.locator("#tree .tree-here > strong").inner_text().startswith(run_id[:12])  # type: ignore[attr-defined]
    page.click(f'#tree a[data-run="{child["run_id"]}"]')  # type: ignore[attr-defined]
    page.wait_for_function(_SHOWS, arg=child["run_id"])  # type: ignore[attr-defined]
    page.wait_for_selector(f'#tree .tree-here[data-run="{child["run_id"]}"]')  # type: ignore[attr-defined]
    page.click(f'#tree-parents a[data-run="{run_id}"]')  # type: ignore[attr-defined]
    page.wait_for_function(_SHOWS, arg=run_id)  # type: ignore[attr-defined]


_SHOWS = """id => location.hash === '#/runs/' + id
    && document.querySelector('h1 .id')?.textContent === id"""
"""The page shows run ``id``: its address and its heading (the old page's heading stays
until the new one has loaded)."""
