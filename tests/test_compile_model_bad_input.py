"""compile_model refuses what it cannot compile with a named error before it touches the compiler
session, and a call that fails leaves nothing behind: the next call with a good model compiles (issue 22:
one bad call used to break every later one with "'NoneType' object has no attribute 'first_plan'")."""

import pytest

from sagemaker_tc import ConfigError, ModelArgumentError, TrainingCompilerConfig, compile_model
from sagemaker_tc.compiler.dynamo import dynamo_stats
from sagemaker_tc.compiler.session import CompilerSession, current_session
from sagemaker_tc.integrations.pytorch import StepWatcher

COMPILE_NOW = TrainingCompilerConfig(plan="model", baseline_steps=0)  # compiled from the first step


def small_model():
    """A user's model: its forward is the user's code, which dynamo traces (torch's own modules it skips)."""
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden, self.out = torch.nn.Linear(4, 8), torch.nn.Linear(8, 2)

        def forward(self, x):
            return self.out(torch.relu(self.hidden(x)))

    torch.manual_seed(0)
    return Net()


def train_one_step(model) -> None:
    import torch

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.randn(3, 4)).square().mean()
    loss.backward()
    optimizer.step()


def assert_compiles(model) -> None:
    """``model`` runs compiled: its compiled-call slot is filled and a training step compiles a graph."""
    assert model._compiled_call_impl is not None
    before = dynamo_stats().frames_compiled
    train_one_step(model)
    assert dynamo_stats().frames_compiled > before


def bad_models():
    import torch

    return {
        "None": (None, r"got None$"),
        "a name": ("bert", r"got the string 'bert': load the model first"),
        "a function": (lambda x: x, r"got builtins\.function$"),
        "the class": (torch.nn.Linear, r"got the class Linear itself: build the model first"),
    }


@pytest.mark.parametrize("case", ["None", "a name", "a function", "the class"])
def test_what_is_not_a_module_is_refused_by_name_and_touches_no_session(case):
    model, message = bad_models()[case]
    with pytest.raises(ModelArgumentError, match=r"compile_model expected a torch\.nn\.Module instance .*" + message):
        compile_model(model)
    assert current_session() is None  # refused before a session was opened


def test_a_torchscript_module_is_refused_by_name_and_touches_no_session():
    import torch

    scripted = torch.jit.script(torch.nn.Linear(2, 2))
    with pytest.raises(ModelArgumentError, match=r"compile_model got a TorchScript module \(RecursiveScriptModule"):
        compile_model(scripted)
    assert current_session() is None


def test_a_model_torch_compile_already_wrapped_is_refused_and_its_module_then_compiles():
    """The wrapper's own compiled call would run outside the fallback, the eager baseline included."""
    import torch

    module = small_model()
    refused = r"torch\.compile already wrapped: pass the module itself \(model\._orig_mod"
    with pytest.raises(ModelArgumentError, match=refused):
        compile_model(torch.compile(module))
    assert current_session() is None
    assert_compiles(compile_model(module, COMPILE_NOW))


def test_after_each_refused_argument_a_good_model_still_compiles():
    for model, _ in bad_models().values():
        with pytest.raises(ModelArgumentError):
            compile_model(model, COMPILE_NOW)
    good = compile_model(small_model(), COMPILE_NOW)
    assert_compiles(good)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"debug": True}, r"config must be a sagemaker_tc\.TrainingCompilerConfig, got builtins\.dict: pass Training"),
        (
            TrainingCompilerConfig().model_copy(update={"backend": "bogus"}),
            r"config did not pass TrainingCompilerConfig's checks .*backend: Input should be 'inductor', 'eager' or "
            r"'xla' \(got 'bogus'\)",
        ),
        (TrainingCompilerConfig().model_copy(update={"plan": "bogus"}), r"plan: Input should be 'auto', 'regional'"),
    ],
    ids=["a dict", "backend bogus", "plan bogus"],
)
def test_a_config_that_is_not_a_checked_config_is_refused_before_any_session(config, message):
    with pytest.raises(ConfigError, match=message):
        compile_model(small_model(), config)
    assert current_session() is None


class UnreadyModel:
    """A module whose weights cannot be read yet: preparing its plans fails inside the runtime's attach,
    after the argument checks (as a model with a broken ``parameters()`` would)."""

    @staticmethod
    def build():
        import torch

        class Unready(torch.nn.Linear):
            def parameters(self, recurse=True):
                raise RuntimeError("weights are not loaded yet")

        return Unready(4, 2)


def test_a_failed_attach_closes_the_session_it_opened_and_the_next_call_compiles():
    with pytest.raises(RuntimeError, match="weights are not loaded yet"):
        compile_model(UnreadyModel.build(), COMPILE_NOW)
    assert current_session() is None  # the session that call opened is closed, its hooks undone

    good = compile_model(small_model(), COMPILE_NOW)
    assert_compiles(good)


def test_a_failed_attach_in_the_jobs_session_leaves_that_session_as_it_was():
    with CompilerSession(COMPILE_NOW) as session:
        undo_before = len(session._undo)
        with pytest.raises(RuntimeError, match="weights are not loaded yet"):
            compile_model(UnreadyModel.build())

        assert current_session() is session and session.state == "open"
        assert (len(session._undo), StepWatcher.watching(session.timer), session.record.integration) == (
            undo_before,
            False,
            None,
        )
        runtime = session.runtime
        assert (runtime.config, runtime.schedule, runtime.plans, runtime.first_model()) == (None, None, [], None)

        good = compile_model(small_model())
        assert runtime.first_model() is good and session.record.integration == "pytorch"
        assert_compiles(good)
        assert session.timer.records  # the step watcher, installed once, counted the step


def test_smtcs_own_config_class_is_taken_as_ours_by_compile_model():
    """SMTC's ``TrainingCompilerConfig(enabled, debug)`` (sagemaker-core still ships it) is accepted where
    the estimators accept it: ``compile_model`` attaches the model under the config it becomes, and a
    disabled one leaves the model uncompiled."""
    from sagemaker.core.training_compiler_config import TrainingCompilerConfig as SmtcConfig

    good = compile_model(small_model(), SmtcConfig(enabled=True, debug=False))
    session = current_session()
    assert session.config == TrainingCompilerConfig()  # ours, converted: not SMTC's object
    assert session.runtime.first_model() is good and session.runtime.config == TrainingCompilerConfig()
    session.close()

    off = compile_model(small_model(), SmtcConfig(enabled=False))
    assert current_session().config == TrainingCompilerConfig(enabled=False)
    assert off._compiled_call_impl is None
    current_session().close()
