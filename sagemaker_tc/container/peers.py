"""Tells each torchrun rank when another rank's script has ended, on any host, through the rendezvous store.

Under torchrun, every rank reaches the store that torchrun's agent on the first host serves
(``MASTER_ADDR:MASTER_PORT`` with ``TORCHELASTIC_USE_AGENT_STORE=True``). A rank whose script ended
counts itself there (:meth:`PeerWatch.announce`); a thread in every other rank polls the count
(:meth:`PeerWatch.start`) and, the first time it is not zero, or once the store is gone (its host
ended), tells the rank's watchdog, which then watches the rank's progress
(:mod:`sagemaker_tc.container.watchdog`).

The thread is stopped and joined before the rank's interpreter shuts down (:meth:`PeerWatch.stop`),
so no store call of ours is in flight when Python finalizes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from sagemaker_tc import contract

logger = logging.getLogger("sagemaker_tc.peers")

KEY_ENDED = "sagemaker_tc/ended"
KEY_FIRST = "sagemaker_tc/first_ended"
STORE_TIMEOUT_S = 5.0
"""Longest a store call may take, seconds (it bounds :meth:`PeerWatch.stop`)."""


def poll_seconds(grace_s: float) -> float:
    """How often a rank looks at the store: a tenth of the grace period, within 1 to 30 seconds."""
    return min(30.0, max(1.0, grace_s / 10))


class PeerWatch:
    """Polls the rendezvous store for another rank's ended script (module docstring).

    Args:
        host, port: the agent's store.
        label: this rank's name (``"algo-2 rank 1"``).
        on_peer_ended: called once, from the thread, with who ended (``"algo-1 rank 0 finished its
            script"``).
        poll_s: seconds between looks.
    """

    def __init__(self, host: str, port: int, label: str, on_peer_ended: Callable[[str], None], poll_s: float) -> None:
        self.host, self.port, self.label = host, port, label
        self.on_peer_ended = on_peer_ended
        self.poll_s = poll_s
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._store_class: Any = None

    @classmethod
    def for_rank(
        cls, environ: Mapping[str, str], label: str, on_peer_ended: Callable[[str], None], poll_s: float
    ) -> PeerWatch | None:
        """The watch for a torchrun rank that uses the agent's store; None elsewhere (or without torch)."""
        if environ.get(contract.ENV_USE_AGENT_STORE) != "True" or contract.ENV_RANK not in environ:
            return None
        host, port = environ.get(contract.ENV_TORCH_MASTER_ADDR), environ.get(contract.ENV_TORCH_MASTER_PORT)
        if not host or not (port or "").isdigit():
            return None
        return cls(host, int(port), label, on_peer_ended, poll_s)

    def _client(self) -> Any:
        return self._store_class(
            self.host,
            self.port,
            is_master=False,
            timeout=timedelta(seconds=STORE_TIMEOUT_S),
            wait_for_workers=False,
        )

    def start(self) -> PeerWatch:
        """Start polling in a daemon thread (torch.distributed is imported here, in the calling thread:
        importing it from the thread while the script imports torch can abort the process)."""
        from torch.distributed import TCPStore

        self._store_class = TCPStore
        self._thread = threading.Thread(target=self._poll, name="sagemaker-tc-peers", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop polling and wait for the thread (at most one store call, ``STORE_TIMEOUT_S``)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def announce(self, outcome: str) -> None:
        """Count this rank's ended script (``outcome``: ``finished``/``failed``) in the store; the first
        rank to end also records its name. Never raises (the store may be gone)."""
        try:
            store = self._client()
            if store.add(KEY_ENDED, 1) == 1:
                store.set(KEY_FIRST, f"{self.label} {outcome} its script")
        except Exception as error:  # the store's host may have ended first
            logger.info("Could not tell the other ranks that this one ended (%s)", error)

    def _poll(self) -> None:
        store = None
        while not self._stopping.wait(self.poll_s):
            try:
                if store is None:
                    store = self._client()
                if store.add(KEY_ENDED, 0) == 0:
                    continue
                first = store.get(KEY_FIRST).decode() if store.check([KEY_FIRST]) else "another rank ended its script"
            except Exception as error:  # the agent that served the store has exited: its host ended
                first = f"the rendezvous store at {self.host}:{self.port} went away ({type(error).__name__})"
            self.on_peer_ended(first)
            return
