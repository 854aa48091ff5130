"""Both runtimes answer the session's protocol (compiler/runtime_protocol.py), member by member."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest

from sagemaker_tc.compiler.runtime import CompilerRuntime
from sagemaker_tc.compiler.runtime_protocol import SessionRuntime
from sagemaker_tc.compiler.xla_runtime import XlaRuntime

MEMBERS = sorted(name for name in {*vars(SessionRuntime), *SessionRuntime.__annotations__} if not name.startswith("_"))


def runtimes() -> list:
    return [CompilerRuntime(), XlaRuntime(SimpleNamespace())]  # XlaRuntime reads its backend only when called


def test_the_protocol_names_what_the_session_asks():
    assert {"attach", "detach", "after_step", "finish_step", "current_label", "final_label", "calls"} <= set(MEMBERS)
    assert {"track_optimizer", "set_job_length", "set_accumulation", "plan_end_listeners"} <= set(MEMBERS)
    assert {"compiled_graphs", "compile_stats", "write_debug"} <= set(MEMBERS)


@pytest.mark.parametrize("runtime", runtimes(), ids=lambda runtime: type(runtime).__name__)
def test_each_runtime_has_every_member_of_the_protocol(runtime):
    assert isinstance(runtime, SessionRuntime)
    missing = [name for name in MEMBERS if not hasattr(runtime, name)]
    assert missing == []


@pytest.mark.parametrize("runtime", runtimes(), ids=lambda runtime: type(runtime).__name__)
def test_each_runtime_method_takes_the_protocols_parameters(runtime):
    for name in MEMBERS:
        wanted = getattr(SessionRuntime, name, None)
        if not callable(wanted):
            continue
        expected = list(inspect.signature(wanted).parameters)[1:]  # without self
        assert list(inspect.signature(getattr(runtime, name)).parameters) == expected, name
