"""What the tests' leak check (``conftest.no_compiler_state_left_behind``) counts of the process-wide
state a compiler session may install. Test-only: the runtime never reads these. They read private
torch state directly; the runtime's own private-API wrappers live in ``sagemaker_tc/_internals.py``."""

from __future__ import annotations

from typing import Any


def compile_start_callbacks() -> list[Any]:
    """The compile start callbacks registered now (a copy): ``torch._dynamo.callback.callback_handler``
    (torch 2.7 to 2.13)."""
    from torch._dynamo.callback import callback_handler

    return list(callback_handler.start_callbacks)


def global_optimizer_step_hooks() -> int:
    """How many global optimizer step hooks are registered (pre and post:
    ``torch.optim.optimizer._global_optimizer_pre_hooks`` / ``_global_optimizer_post_hooks``,
    torch 2.0 to 2.13)."""
    import torch.optim.optimizer as optimizer_module

    return len(optimizer_module._global_optimizer_pre_hooks) + len(optimizer_module._global_optimizer_post_hooks)


def is_post_import_hook(finder: object) -> bool:
    """True for the finders :func:`sagemaker_tc.container.post_import.when_imported` installs."""
    from sagemaker_tc.container import post_import

    return isinstance(finder, post_import._PostImportFinder)
