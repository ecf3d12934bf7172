"""The one hook rule (corun._guard): corun's failures go the stack's way, counted; the
stack's own exceptions pass through unchanged, once, and are not corun's."""

import pytest

from corun._guard import Counters, guarded, stack_way


class StackError(RuntimeError):
    pass


def test_a_corun_failure_is_counted_and_the_call_goes_the_stacks_way():
    counters, calls = Counters("hits"), []

    def own(x):
        calls.append(x)
        return ("own", x)

    def corun_way(x):
        raise ZeroDivisionError("corun's bug")

    assert guarded(counters, "hook", own)(corun_way)(3) == ("own", 3)
    assert calls == [3]
    assert counters.get("errors") == 1 and counters.get("hook_errors") == 1


def test_the_stacks_exception_passes_through_once_and_uncounted():
    counters, calls = Counters("hits"), []
    raised = StackError("the stack's own failure")

    def own(x):
        calls.append(x)
        raise raised

    theirs = stack_way(own)

    def corun_way(x):
        return theirs(x)  # the hook hands this call to the stack's own function

    with pytest.raises(StackError) as got:
        guarded(counters, "hook", own)(corun_way)(7)
    assert got.value is raised  # the same object, unchanged
    assert got.value.__context__ is None and got.value.__cause__ is None
    assert calls == [7]  # the stack's function ran exactly once
    assert counters.get("errors") == 0 and counters.get("hook_errors") == 0


def test_the_stacks_result_through_stack_way_is_returned_as_it_is():
    counters = Counters()
    marker = object()
    safe = guarded(counters, "hook", lambda: None)(lambda: stack_way(lambda: marker)())
    assert safe() is marker and counters.get("errors") == 0


def test_stop_the_process_exceptions_are_not_caught():
    def corun_way():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        guarded(Counters(), "hook", lambda: "own")(corun_way)()
