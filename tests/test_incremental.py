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


def test_the_token_hook_sets_the_same_config_again_only_when_the_token_expired(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client runs `refresh_api_key_hook` before every request; its loader's hook set the same token, host and
    certificates again each time (0.3 s CPU of a steady 10,000-job cycle). A static token is now left as it is,
    while an exec plugin's expired token is still fetched again before the next request."""
    import os
    import stat

    import yaml
    from kubernetes.config import kube_config

    calls = {"n": 0}
    original = kube_config.KubeConfigLoader._set_config

    def counted(self: Any, cfg: Any) -> None:
        calls["n"] += 1
        original(self, cfg)

    monkeypatch.setattr(kube_config.KubeConfigLoader, "_set_config", counted)
    path = write_kubeconfig(tmp_path / "kubeconfig", {"ctx-0": "https://10.0.0.1:6443"})
    cfg = client_configuration(Target("c0", "ctx-0", "fleet/clusters/c0.yaml:3"), str(path))
    loaded = calls["n"]
    assert [cfg.get_api_key_with_prefix("BearerToken") for _ in range(20)] == ["Bearer fleet-test-token"] * 20
    assert calls["n"] == loaded                       # a static token: nothing set again

    counter = tmp_path / "n"
    plugin = tmp_path / "plugin"
    credential = ('{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential",'
                  '"status":{"token":"t-%s","expirationTimestamp":"2001-01-01T00:00:00Z"}}')
    plugin.write_text(f"#!/bin/sh\nn=$(($(cat {counter} 2>/dev/null || echo 0) + 1)); echo $n > {counter}\n"
                      f"printf '{credential}' $n\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    doc = yaml.safe_load(path.read_text())
    doc["users"][0]["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(plugin)}}
    path.write_text(yaml.safe_dump(doc))
    cfg = client_configuration(Target("c0", "ctx-0", "fleet/clusters/c0.yaml:3"), str(path))
    first = cfg.get_api_key_with_prefix("BearerToken")
    second = cfg.get_api_key_with_prefix("BearerToken")
    assert first != second and second.startswith("Bearer t-")   # expired: fetched again before each request
    assert os.path.exists(counter)
