"""The kubeconfig, read and parsed once while its files' bytes stay the same.  EFFECT (reads the files).

`kubernetes.config.load_kube_config` reads and parses the whole kubeconfig (pure-Python YAML) for each context it
is asked for; a reconcile cycle asks for every cluster's context to observe and again to act, so a fleet of 20
clusters parsed the same file 41 times a cycle (0.3-0.7 s CPU of the steady cycle at 10,000 jobs,
bench/bench_reconcile.py). Here the files are merged as the client merges them (`KubeConfigMerger`: the
`KUBECONFIG`-style list of paths, `~` expanded, missing files skipped, each file's path kept for its relative
certificate paths) and kept by their paths and bytes: a changed, added or removed file is read again. Each
caller gets its own deep copy, since the client's loader may refresh tokens in what it is given.
"""

from __future__ import annotations

import copy
import os
import threading
from typing import Any

from kubernetes.config import ConfigException, kube_config

_lock = threading.Lock()
_merged: dict[str | None, tuple[tuple[tuple[str, bytes], ...], Any]] = {}


def _contents(paths: str) -> tuple[tuple[str, bytes], ...]:
    out = []
    for path in paths.split(kube_config.ENV_KUBECONFIG_PATH_SEPARATOR):
        if path:
            path = os.path.expanduser(path)
            if os.path.exists(path):
                with open(path, "rb") as f:
                    out.append((path, f.read()))
    return tuple(out)


def load(kubeconfig: str | None, context: str, cfg: Any) -> None:
    """`load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg,
    persist_config=False)`, from the parse kept for the files' current bytes. Raises what it raises."""
    paths = kubeconfig if kubeconfig is not None else kube_config.KUBE_CONFIG_DEFAULT_LOCATION
    key = _contents(paths)
    with _lock:
        hit = _merged.get(kubeconfig)
    if hit is None or hit[0] != key:
        merger = kube_config.KubeConfigMerger(paths)   # type: ignore[no-untyped-call]
        if merger.config is None:
            raise ConfigException("Invalid kube-config file. No configuration found.")
        hit = (key, merger.config)
        with _lock:
            _merged[kubeconfig] = hit
    loader = kube_config.KubeConfigLoader(   # type: ignore[no-untyped-call]
        config_dict=copy.deepcopy(hit[1]), config_base_path=None, active_context=context)
    loader.load_and_set(cfg)   # type: ignore[no-untyped-call]
    hook = cfg.refresh_api_key_hook
    if hook is not None:
        cfg.refresh_api_key_hook = _when_expired(loader, hook)


def _when_expired(loader: Any, hook: Any) -> Any:
    """The client's token refresh hook, run only when the token has an expiry that has passed. The client runs
    the hook before every request, and it sets the same token, host and certificates again each time, unless the
    token expired (`_refresh_api_key` in kube_config.py): 0.3 s CPU for the 783 requests of a steady
    cycle at 10,000 jobs (bench/bench_reconcile.py). Without an expiry, nothing it sets can change."""
    expired = kube_config._is_expired

    def refresh(cfg: Any) -> None:
        if "expiry" in loader.__dict__ and expired(loader.expiry):  # type: ignore[no-untyped-call]
            hook(cfg)

    return refresh
