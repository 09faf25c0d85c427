"""Supervision: restart exactly as configured, then escalate."""

from __future__ import annotations

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from structlog.testing import capture_logs

from runtime import (
    Actor,
    ActorStoppedError,
    ActorSystem,
    EscalationError,
    Restart,
    Strategy,
    handler,
)
from tests.runtime._actors import Add, Counter, Crash, Note, Read

pytestmark = pytest.mark.anyio


class Lifecycle(Actor):
    """Counts its starts in a list the test owns."""

    def __init__(self, starts: list[str]) -> None:
        self.starts = starts

    async def on_start(self) -> None:
        self.starts.append(self.name)

    @handler
    def crash(self, msg: Crash) -> None:
        raise RuntimeError(msg.reason)

    @handler
    def stop_now(self, msg: Note) -> None:
        self.stop()

    @handler
    def read(self, msg: Read) -> int:
        return len(self.starts)


async def test_crash_is_logged_with_actor_message_type_and_traceback() -> None:
    with capture_logs() as logs:
        async with ActorSystem(lag_interval=None) as system:
            counter = system.spawn(Counter, name="counter")
            await counter.tell(Crash(reason="kaboom"))
            await counter.ask(Read(), timeout=1.0)
    crashes = [entry for entry in logs if entry["event"] == "actor_crashed"]
    assert len(crashes) == 1
    assert crashes[0]["actor"] == "counter"
    assert crashes[0]["msg_type"] == "Crash"
    assert isinstance(crashes[0]["exc_info"], RuntimeError)
    letters = system.dead_letters.recent()
    assert [(d.actor, d.message_type, d.reason) for d in letters] == [
        ("counter", "Crash", "crashed")
    ]


async def test_mailbox_survives_a_restart() -> None:
    async with ActorSystem(lag_interval=None) as system:
        counter = system.spawn(Counter, name="counter")
        # All queued at once: the crash happens with the adds behind it in the mailbox.
        assert counter.try_tell(Add(amount=1))
        assert counter.try_tell(Crash())
        assert counter.try_tell(Add(amount=2))
        assert counter.try_tell(Add(amount=3))
        assert await counter.ask(Read(), timeout=1.0) == 5
        assert system.statistics().restarts == 1


async def test_one_for_one_restarts_only_the_crashed_child() -> None:
    starts: list[str] = []
    async with ActorSystem(lag_interval=None) as system:
        sup = system.supervisor("group", strategy=Strategy.ONE_FOR_ONE, max_restarts=5)
        a = sup.spawn(lambda: Lifecycle(starts), name="a")
        sup.spawn(lambda: Lifecycle(starts), name="b")
        await a.ask(Read(), timeout=1.0)
        await system.lookup("b").ask(Read(), timeout=1.0)
        await a.tell(Crash())
        await a.ask(Read(), timeout=1.0)
    assert sorted(starts) == ["a", "a", "b"]


async def test_one_for_all_restarts_every_sibling() -> None:
    starts: list[str] = []
    async with ActorSystem(lag_interval=None) as system:
        sup = system.supervisor("group", strategy=Strategy.ONE_FOR_ALL, max_restarts=5)
        a = sup.spawn(lambda: Lifecycle(starts), name="a")
        b = sup.spawn(lambda: Lifecycle(starts), name="b")
        c = sup.spawn(lambda: Lifecycle(starts), name="c")
        for ref in (a, b, c):
            await ref.ask(Read(), timeout=1.0)
        await b.tell(Crash())
        for ref in (a, b, c):
            await ref.ask(Read(), timeout=1.0)
    assert sorted(starts) == ["a", "a", "b", "b", "c", "c"]


@pytest.mark.parametrize(
    ("restart", "after_crash", "after_stop"),
    [
        (Restart.PERMANENT, True, True),
        (Restart.TRANSIENT, True, False),
        (Restart.TEMPORARY, False, False),
    ],
)
async def test_restart_types(restart: Restart, after_crash: bool, after_stop: bool) -> None:
    for trigger, expect_restart in [(Crash(), after_crash), (Note(sender=0, seq=0), after_stop)]:
        starts: list[str] = []
        async with ActorSystem(lag_interval=None) as system:
            ref = system.spawn(lambda s=starts: Lifecycle(s), name="child", restart=restart)
            await ref.ask(Read(), timeout=1.0)
            await ref.tell(trigger)
            await anyio.wait_all_tasks_blocked()
            assert len(starts) == (2 if expect_restart else 1), (restart, trigger)
            assert system.statistics().actors == (1 if expect_restart else 0)


async def test_at_most_n_restarts_within_t_then_escalate_to_parent() -> None:
    inner_starts: list[str] = []
    with pytest.raises(EscalationError, match="'root' gave up"):
        async with ActorSystem(lag_interval=None, max_restarts=1, within=60.0) as system:
            sup = system.supervisor("inner", max_restarts=2, within=10.0)
            ref = sup.spawn(lambda: Lifecycle(inner_starts), name="worker")
            # Two crashes inside 10 s: both restarted.
            for _ in range(2):
                await ref.tell(Crash())
                await anyio.wait_all_tasks_blocked()
            assert inner_starts == ["worker"] * 3
            # Spread out past the window, crashes do not accumulate.
            await anyio.sleep(11.0)
            await ref.tell(Crash())
            await anyio.wait_all_tasks_blocked()
            assert inner_starts == ["worker"] * 4
            # Third crash within the window: "inner" escalates; root restarts it (1 allowed).
            for _ in range(2):
                await ref.tell(Crash())
                await anyio.wait_all_tasks_blocked()
            assert inner_starts == ["worker"] * 6  # root restarted "inner", and so its worker
            # The restarted "inner" starts with a clean restart history.
            await ref.tell(Crash())
            await anyio.wait_all_tasks_blocked()
            assert inner_starts == ["worker"] * 7
            # inner escalates again within root's window: root gives up, the system ends.
            for _ in range(3):
                await ref.tell(Crash())
                await anyio.wait_all_tasks_blocked()
            pytest.fail("the system should have ended with EscalationError")


async def test_crash_in_on_start_counts_as_a_crash() -> None:
    attempts: list[int] = []

    class FailsTwice(Actor):
        async def on_start(self) -> None:
            attempts.append(1)
            if len(attempts) <= 2:
                raise RuntimeError("not ready")

        @handler
        def read(self, msg: Read) -> int:
            return len(attempts)

    async with ActorSystem(lag_interval=None, max_restarts=5) as system:
        ref = system.spawn(FailsTwice, name="flaky")
        assert await ref.ask(Read(), timeout=1.0) == 3
        assert system.statistics().restarts == 2


async def test_watchdog_reports_a_handler_stuck_past_its_budget_with_the_stack() -> None:
    import anyio as _anyio

    from tests.runtime._actors import Hold, Recorder

    gate = _anyio.Event()
    async with ActorSystem(lag_interval=None, handler_budget=5.0) as system:
        ref = system.spawn(lambda: Recorder([], gate), name="stuck")
        await ref.tell(Hold())
        await _anyio.sleep(4.0)
        assert system.stuck_handlers == []  # within budget
        await _anyio.sleep(3.0)
        gate.set()
    [report] = system.stuck_handlers
    assert report.actor == "stuck"
    assert report.message_type == "Hold"
    assert 5.0 <= report.seconds <= 7.0
    assert "hold" in report.stack  # the handler's frame is in the stack
    assert system.metrics.snapshot()["stuck_handlers_total"] == 1


async def test_spawning_on_a_stopped_supervisor_is_refused() -> None:
    async with ActorSystem(lag_interval=None) as system:
        gave_up = system.supervisor("gave-up", max_restarts=0, restart=Restart.TEMPORARY)
        ref = gave_up.spawn(Counter, name="a")
        await ref.tell(Crash())
        await gave_up.stopped.wait()
        closed = system.supervisor("closed")
        closed.close()
        await closed.stopped.wait()
        for stopped in (gave_up, closed):
            with pytest.raises(RuntimeError, match=f"supervisor '{stopped.name}' is stopped"):
                stopped.spawn(Counter, name="b")
            with pytest.raises(RuntimeError, match="is stopped"):
                stopped.supervisor("inner")
        assert system.statistics().actors == 0


async def test_children_of_a_supervisor_that_gave_up_for_good_are_stopped() -> None:
    async with ActorSystem(lag_interval=None, stop_timeout=30.0) as system:
        sup = system.supervisor("group", max_restarts=0, restart=Restart.TEMPORARY)
        crasher = sup.spawn(Counter, name="crasher")
        bystander = sup.spawn(Counter, name="bystander")
        await crasher.tell(Crash())
        await sup.stopped.wait()
        assert system.statistics().actors == 0
        with pytest.raises(ActorStoppedError):
            await bystander.tell(Add(amount=1))
        system.spawn(Counter, name="bystander")  # the name is free again
        stop_began = anyio.current_time()
    assert anyio.current_time() == stop_began  # nothing left to wait for at stop
    assert system.stop_report is not None
    assert system.stop_report.graceful


async def test_closing_a_supervisor_stops_the_actors_of_its_child_supervisors() -> None:
    async with ActorSystem(lag_interval=None, stop_timeout=30.0) as system:
        outer = system.supervisor("outer")
        inner = outer.supervisor("inner")
        ref = inner.spawn(Counter, name="deep")
        assert await ref.ask(Read(), timeout=1.0) == 0
        outer.close()
        await outer.stopped.wait()
        assert inner.stopped.is_set()
        assert system.statistics().actors == 0
        with pytest.raises(ActorStoppedError):
            await ref.ask(Read(), timeout=1.0)
        stop_began = anyio.current_time()
    assert anyio.current_time() == stop_began
    assert system.stop_report is not None
    assert system.stop_report.graceful


class Resource(Actor):
    """Holds a resource that on_stop releases; a crash with keep_state keeps it."""

    def __init__(self, released: list[str]) -> None:
        self.released = released

    async def on_stop(self) -> None:
        self.released.append(self.name)

    @handler
    def crash(self, msg: Crash) -> None:
        raise RuntimeError(msg.reason)


async def test_a_kept_instance_that_will_not_be_resumed_is_stopped() -> None:
    released: list[str] = []
    async with ActorSystem(lag_interval=None) as system:
        ref = system.spawn(
            lambda: Resource(released), name="once", restart=Restart.TEMPORARY, keep_state=True
        )
        await ref.tell(Crash())
        await wait_all_tasks_blocked()
        assert system.statistics().actors == 0
        assert released == ["once"]  # at once, not only when the system exits
    assert released == ["once"]


async def test_a_kept_instance_is_stopped_when_its_crash_ends_the_system() -> None:
    released: list[str] = []
    with pytest.raises(EscalationError):
        async with ActorSystem(lag_interval=None, max_restarts=0) as system:
            ref = system.spawn(lambda: Resource(released), name="kept", keep_state=True)
            await ref.tell(Crash())
            await anyio.sleep_forever()
    assert released == ["kept"]
