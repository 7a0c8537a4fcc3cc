"""Issue 22 item 5: what one reconcile cycle no longer recomputes, and that the results do not change. (The
victim memo of plan/preempt.py was taken out again: merged with reservations, it changed plans.)

- observe/kubeconfig.py: the kubeconfig is parsed once for all the clusters' contexts, and again only when its
  bytes change;
- gcpause.CyclePause: the collector is paused while a cycle runs, and what the cycle left is collected after.
"""

from __future__ import annotations

import gc
import sys
import weakref
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from reconciler.observe import kube
from reconciler.observe.kube import ContextError, Target, client_configuration
from reconciler.observe.model import Snapshot
from reconciler.reconcile.loop import Config, Reconciler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kube_api import write_kubeconfig

NOW = datetime(2026, 11, 23, 8, tzinfo=UTC)


def test_the_kubeconfig_is_parsed_once_for_every_context_and_again_when_it_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes.config import kube_config

    parsed = {"n": 0}
    merger = kube_config.KubeConfigMerger

    class Counted(merger):  # type: ignore[misc, valid-type]
        def __init__(self, paths: Any) -> None:
            parsed["n"] += 1
            super().__init__(paths)

    monkeypatch.setattr(kube_config, "KubeConfigMerger", Counted)
    path = write_kubeconfig(tmp_path / "kubeconfig", {f"ctx-{i}": f"https://10.0.0.{i}:6443" for i in range(5)})
    targets = [Target(f"c{i}", f"ctx-{i}", f"fleet/clusters/c{i}.yaml:3") for i in range(5)]
    hosts = [client_configuration(t, str(path)).host for t in targets * 2]
    assert hosts == [f"https://10.0.0.{i}:6443" for i in range(5)] * 2
    assert parsed["n"] == 1
    write_kubeconfig(path, {"ctx-0": "https://10.9.9.9:6443"})   # the file changed: read again
    assert client_configuration(targets[0], str(path)).host == "https://10.9.9.9:6443"
    assert parsed["n"] == 2
    with pytest.raises(ContextError) as e:                         # a context it no longer has: said so
        client_configuration(targets[1], str(path))
    assert "cannot use kubeconfig context `ctx-1`" in e.value.problem.message
    with pytest.raises(ContextError):
        client_configuration(targets[0], str(tmp_path / "missing"))
    assert kube.client_configuration is client_configuration


class Cyclic:
    def __init__(self) -> None:
        self.me = self


def test_a_cycle_runs_with_the_collector_paused_and_collects_what_it_left(tmp_path: Path) -> None:
    seen: list[bool] = []

    def observer(files: Any, kubeconfig: Any, now: datetime) -> Snapshot:
        seen.append(gc.isenabled())
        return Snapshot(observed_at=now, clusters=())

    root = Path(__file__).resolve().parents[1]
    loop = Reconciler(Config(repo=root, once=True, dry_run=True, layers=("infra", "kueue", "jobs")),
                      clock=lambda: NOW, say=lambda line: None, observer=observer)
    report = loop.cycle()
    assert seen == [False] and gc.isenabled() and not report.errors
    from reconciler.gcpause import CyclePause

    pause = CyclePause(full_every=2)
    refs = []
    for _ in range(2):
        with pause.run():
            assert not gc.isenabled()
            refs.append(weakref.ref(Cyclic()))           # cyclic garbage: only the collector frees it
            assert refs[-1]() is not None
        assert gc.isenabled() and all(r() is None for r in refs)
