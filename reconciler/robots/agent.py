"""`fleet robot-agent`: on a robot, keep the model its desired state names, and say how it runs.  EFFECT (network,
files, clock).

One round:
    1. pull    `fleet-desired/<fleet>/<robot>` from the registry (unreachable: the last desired state kept in
               the state folder stands, and the robot keeps running what it runs: offline is not a failure)
    2. stage   the desired model, blob by blob, into `models/<hex>.partial/` (a cut download resumes there),
               each blob and the manifest verified by sha256, then renamed whole to `models/<hex>/`; before
               the window too (prestage), and only when the disk holds it beside the running model
    3. switch  inside the window only (no window: at once): `current` (the symlink the policy server serves
               from) is replaced in one rename, the model it pointed at becomes `previous`; models other than
               the running one, the previous one and the desired one are deleted; the running model never is
    4. probe   the policy server's health (`--health-url`, else http://127.0.0.1:<port><health_path>): 2xx ok,
               anything else failed, nothing running unknown
    5. push    `fleet-status/<fleet>/<robot>`: digest running, previous, health, heartbeat, when it switched
The state folder's `agent.json` keeps what runs across restarts. Switching happens between rounds, so between
episodes of a robot that polls its server per episode (the server reloads from `current`).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from ..safeio import write_file
from . import cron
from .registry import DESIRED, STATUS, Registry, RegistryError

HEALTH_TIMEOUT_S = 5.0
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
"""Digests name files and folders of the state folder: nothing else (no `/`, no `..`) is ever used as a name."""


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def _probe(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=HEALTH_TIMEOUT_S) as r:
            return "ok" if 200 <= r.status < 300 else "failed"
    except urllib.error.HTTPError:
        return "failed"
    except (OSError, ValueError, http.client.HTTPException):   # refused, not HTTP, cut mid-answer
        return "failed"


class Agent:
    def __init__(self, registry_url: str, robot: str, state_dir: Path, health_url: str | None = None,
                 timeout_s: float = 10.0) -> None:
        self.registry = Registry(registry_url, timeout_s)
        self.robot, self.dir, self.health_url = robot, state_dir, health_url
        self.models = state_dir / "models"
        self.models.mkdir(parents=True, exist_ok=True)

    def round(self, now: datetime) -> dict[str, Any]:
        state = _read(self.dir / "agent.json")
        errors: list[str] = []
        reachable = True
        try:
            desired = self.registry.pull_json(DESIRED, self.robot)
            if desired is not None:
                try:
                    write_file(self.dir / "desired.json", json.dumps(desired, sort_keys=True) + "\n")
                except OSError as e:        # a full disk: the robot still reports
                    errors.append(f"cannot keep the desired state in {self.dir}: {e.strerror or e}")
        except RegistryError as e:
            reachable, desired = False, _read(self.dir / "desired.json") or None
            errors.append(e.message)
        target = desired.get("model") if desired else None
        if target is not None and not (isinstance(target, str) and DIGEST.fullmatch(target)):
            errors.append(f"the desired state names no model digest ({str(target)[:80]!r}): ignored")
            desired, target = None, None
        if desired is not None and target != state.get("running"):
            staged = self._stage(desired, errors) if target else True
            if staged and self._window_open(desired, now):
                try:
                    state = self._switch(state, target, desired, now)
                except OSError as e:        # a full disk: `current` and what runs as before, reported
                    errors.append(f"cannot switch under {self.dir}: {e.strerror or e}")
        self._prune(state, target)
        health = "unknown"
        if state.get("running"):
            url = self.health_url or (desired or {}).get("health_url")
            health = _probe(str(url)) if url else "unknown"
        status = {"robot": self.robot, "deployment": state.get("deployment"), "running": state.get("running"),
                  "previous": state.get("previous"), "health": health, "heartbeat": now.isoformat(),
                  "switched_at": state.get("switched_at"), "desired": target,
                  "staged": bool(target) and (self.models / str(target).split(":")[1]).is_dir(),
                  "from_job": state.get("from_job"), "errors": errors[:5]}
        if reachable:
            try:
                self.registry.push_json(STATUS, self.robot, status)
            except RegistryError as e:
                reachable = False
                errors.append(e.message)
        return {"robot": self.robot, "deployment": state.get("deployment"), "running": state.get("running"),
                "health": health, "registry": "ok" if reachable else "unreachable"}

    # --- the parts ----------------------------------------------------------------------------------------------
    def _window_open(self, desired: dict[str, Any], now: datetime) -> bool:
        window = desired.get("window")
        if not window:
            return True
        parsed = cron.parse(str(window.get("cron", "")))
        return not isinstance(parsed, str) and cron.window_open(parsed, float(window.get("hours", 0)), now)

    def _stage(self, desired: dict[str, Any], errors: list[str]) -> bool:
        """The desired model staged whole and verified in models/<hex>/ (True), or why not yet (False)."""
        digest, repo = str(desired["model"]), str(desired.get("repository", ""))
        final = self.models / digest.split(":")[1]
        if final.is_dir():
            return True
        partial = self.models / (final.name + ".partial")
        try:
            manifest = self.registry.manifest(repo, digest)
            if manifest is None:
                errors.append(f"model {repo}@{digest[:19]} is not in the registry")
                return False
            layers = manifest.get("layers") or []
            need = sum(int(x.get("size", 0)) for x in layers)
            have = sum(f.stat().st_size for f in partial.glob("*")) if partial.is_dir() else 0
            free = shutil.disk_usage(self.models).free
            if need - have > free:
                errors.append(f"the model needs {need - have:,} bytes more, the disk has {free:,} free")
                return False
            blobs = [str(layer["digest"]) for layer in layers]
            if not all(DIGEST.fullmatch(b) for b in blobs):
                errors.append(f"model {repo}@{digest[:19]}: a layer digest is not sha256:<64 hex>")
                return False
            partial.mkdir(exist_ok=True)
            for blob in blobs:
                self.registry.fetch_blob(repo, blob, partial / blob.split(":")[1])
            (partial / "manifest.json").write_text(json.dumps(manifest, sort_keys=True))
            os.replace(partial, final)
            return True
        except RegistryError as e:
            errors.append(e.message)
            return False
        except (KeyError, TypeError, ValueError):
            errors.append(f"model {repo}@{digest[:19]}: the manifest is not an OCI manifest")
            return False
        except OSError as e:         # the disk: full, read-only; what runs is untouched
            errors.append(f"cannot write the model under {self.models}: {e.strerror or e}")
            return False

    def _switch(self, state: dict[str, Any], target: str | None, desired: dict[str, Any],
                now: datetime) -> dict[str, Any]:
        link = self.dir / "current"
        tmp = self.dir / "current.next"
        tmp.unlink(missing_ok=True)
        if target:
            tmp.symlink_to(Path("models") / target.split(":")[1])
            os.replace(tmp, link)
        else:
            link.unlink(missing_ok=True)     # back to no model: the files stay (deleted only once replaced)
        new = {"running": target, "previous": state.get("running") or state.get("previous"),
               "switched_at": now.isoformat(), "deployment": desired.get("deployment"),
               "from_job": desired.get("from_job") if target else None}
        write_file(self.dir / "agent.json", json.dumps(new, sort_keys=True) + "\n")
        return new

    def _prune(self, state: dict[str, Any], target: str | None) -> None:
        """Delete complete models that are neither running, previous nor desired (never the running one)."""
        keep = {str(d).split(":")[1] for d in (state.get("running"), state.get("previous"), target) if d}
        for entry in self.models.iterdir():
            if entry.is_dir() and entry.name.removesuffix(".partial") not in keep:
                shutil.rmtree(entry, ignore_errors=True)
