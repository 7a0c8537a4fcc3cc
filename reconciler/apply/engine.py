"""The Pulumi Automation API behind the `Engine` protocol: the ONE module that imports `pulumi.automation`.

EFFECT (Pulumi CLI, cloud APIs, environment). Decisions, and why:
- Inline programs: `stacks.program_for(spec)` runs in this process; each stack is created or selected by name
  (`create_or_select_stack`), so a rerun after a failure picks up where Pulumi's state left off.
- Backend: `file://<repo>/.fleet/pulumi` (created if missing, git-ignored through `.fleet/`) unless
  `PULUMI_BACKEND_URL` is set, e.g. to Pulumi Cloud or a bucket shared with CI.
- Passphrase: self-managed backends (file, s3, gs, azblob) encrypt stack secrets with
  PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE). Fleet never invents one: with neither set it
  stops before touching any stack, saying so (an empty value is accepted, as Pulumi accepts it, for a
  throwaway local backend; it protects nothing).
- In CI (`CI` or `GITHUB_ACTIONS` set) none of that fallback: a workflow whose secrets are missing expands
  `PULUMI_BACKEND_URL` and `PULUMI_CONFIG_PASSPHRASE` to empty strings, and apply would run against a fresh
  local state that knows no resource (every stack would be created again) with secrets encrypted by nothing.
  So in CI apply needs a non-empty PULUMI_BACKEND_URL and, for a self-managed backend, a non-empty passphrase
  (or a passphrase file), and refuses otherwise (exit 2).
- Stack configuration (GCP project, EKS role and subnets, zones, contexts) lives in the Pulumi workspace
  directory `<repo>/pulumi/` as the usual `Pulumi.<stack>.yaml` files, so it can be committed and reviewed
  like the rest of the fleet; the project settings (`Pulumi.yaml`, project `fleet`) are written there too.
- Every preview and update refreshes first: drift made outside Fleet (a node pool resized by hand) shows up
  in the preview and is undone by the update, which is what GitOps promises.
- A preview also captures each resource's step (`on_event`: `EngineEvent.resource_pre_event.metadata`, its
  `op`, `urn`, `type`, `keys`, the properties forcing a replacement, and the detailed diff's property paths)
  as `pool_guard.Step`s, from which
  apply and the reconcile loop find the node pools an update would replace, re-create or delete.
- The provider plugin a stack needs is installed at the version of the Python SDK installed with Fleet.
- Errors: a missing or too old Pulumi CLI stops everything (UsageError, exit 2, with an install hint);
  a locked stack, a provider failure or a failing program fails that stack only (StackFailed), reported as
  Pulumi's `error:` lines without the Python traceback.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping
from enum import Enum
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from ..extras import missing
from ..problems import UsageError

try:
    from pulumi import automation as auto
except ImportError as e:     # the light install: `fleet apply` needs the `apply` extra
    raise missing("apply", "fleet apply (and the reconciler's pool resizes)", e) from None

from stacks import program_for

from .orchestrate import StackFailed
from .pool_guard import Preview, Step

PROJECT = "fleet"
DEFAULT_BACKEND_DIR = Path(".fleet/pulumi")
WORKSPACE_DIR = Path("pulumi")
SELF_MANAGED_SCHEMES = ("file://", "s3://", "gs://", "azblob://")
PLUGIN_BY_LAYER_PROVIDER = {("infra", "gcp"): "gcp", ("infra", "aws"): "aws"}
T = TypeVar("T")
INSTALL_HINT = ("install the Pulumi CLI (official installer: `curl -fsSL https://get.pulumi.com | sh`, "
                "or see pulumi.com/docs/install); in GitHub Actions add the `pulumi/actions` setup step")


def require_pulumi_cli() -> None:
    """Stop with exit 2 and an install hint when the `pulumi` executable is not on PATH."""
    if shutil.which("pulumi") is None:
        raise UsageError("fleet apply needs the Pulumi CLI (`pulumi`), and it is not on PATH", INSTALL_HINT)


def backend_url(repo: Path, environ: Mapping[str, str]) -> str:
    """PULUMI_BACKEND_URL if set, else the local file backend under the repository (directory created)."""
    url = environ.get("PULUMI_BACKEND_URL")
    if url:
        return url
    directory = (repo / DEFAULT_BACKEND_DIR).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    return f"file://{directory}"


def require_passphrase(url: str, environ: Mapping[str, str]) -> None:
    if not url.startswith(SELF_MANAGED_SCHEMES):
        return
    if "PULUMI_CONFIG_PASSPHRASE" in environ or "PULUMI_CONFIG_PASSPHRASE_FILE" in environ:
        return
    raise UsageError(
        f"the Pulumi backend {url} encrypts stack secrets with a passphrase, and none is set",
        "export PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE) and keep it with your other secrets "
        "(in CI, a repository secret); for a throwaway local backend, `export PULUMI_CONFIG_PASSPHRASE=` "
        "(empty: nothing is protected)")


def in_ci(environ: Mapping[str, str]) -> bool:
    return bool(environ.get("CI") or environ.get("GITHUB_ACTIONS"))


def require_ci_secrets(environ: Mapping[str, str]) -> None:
    """In CI, refuse the local throwaway backend and an empty passphrase (see the module docstring)."""
    if not in_ci(environ):
        return
    hint = ("set the repository (or `production` environment) secrets PULUMI_BACKEND_URL and "
            "PULUMI_CONFIG_PASSPHRASE that the workflow passes to `fleet apply`")
    url = environ.get("PULUMI_BACKEND_URL", "")
    if not url:
        raise UsageError("refusing to apply in CI without PULUMI_BACKEND_URL: a local state made for this run "
                         "knows none of the live resources", hint)
    if url.startswith(SELF_MANAGED_SCHEMES) and not environ.get("PULUMI_CONFIG_PASSPHRASE") \
            and not environ.get("PULUMI_CONFIG_PASSPHRASE_FILE"):
        raise UsageError(f"refusing to apply in CI with an empty passphrase: the {url.split('://')[0]} backend "
                         "would keep stack secrets unencrypted", hint)


class PulumiEngine:
    """`Engine` backed by the Automation API. Construct with `PulumiEngine.for_repo(repo, on_output)`."""

    def __init__(self, workspace_dir: Path, env_vars: dict[str, str], on_output: Callable[[str], None]) -> None:
        self.workspace_dir = workspace_dir
        self.env_vars = env_vars
        self.on_output = on_output
        self._plugins_done: set[str] = set()

    @classmethod
    def for_repo(cls, repo: Path, on_output: Callable[[str], None]) -> PulumiEngine:
        require_pulumi_cli()
        environ = dict(os.environ)
        require_ci_secrets(environ)
        url = backend_url(repo, environ)
        require_passphrase(url, environ)
        workspace = (repo / WORKSPACE_DIR).resolve()
        workspace.mkdir(parents=True, exist_ok=True)
        return cls(workspace, {"PULUMI_BACKEND_URL": url, "PULUMI_SKIP_UPDATE_CHECK": "true"}, on_output)

    def preview(self, spec: Mapping[str, Any]) -> dict[str, int]:
        return self.preview_steps(spec).counts

    def preview_steps(self, spec: Mapping[str, Any]) -> Preview:
        """The preview's counts and its resource steps, captured from the engine events as they come."""
        stack = self._stack(spec)
        steps: list[Step] = []

        def on_event(event: auto.EngineEvent) -> None:
            if event.resource_pre_event is not None:
                steps.append(step_of(event.resource_pre_event.metadata))

        result = _guard(spec, lambda: stack.preview(refresh=True, color="never", on_output=self.on_output,
                                                    on_event=on_event))
        return Preview(_counts(result.change_summary), tuple(steps))

    def up(self, spec: Mapping[str, Any]) -> dict[str, int]:
        stack = self._stack(spec)
        result = _guard(spec, lambda: stack.up(refresh=True, color="never", on_output=self.on_output))
        return _counts(result.summary.resource_changes or {})

    def _stack(self, spec: Mapping[str, Any]) -> auto.Stack:
        opts = auto.LocalWorkspaceOptions(
            work_dir=str(self.workspace_dir),
            env_vars=self.env_vars,
            project_settings=auto.ProjectSettings(name=PROJECT, runtime="python",
                                                  description="Fleet: stacks rendered from the fleet repository"),
        )
        program = program_for(dict(spec))
        stack = _guard(spec, lambda: auto.create_or_select_stack(
            stack_name=spec["stack"], project_name=PROJECT, program=program, opts=opts))
        plugin = PLUGIN_BY_LAYER_PROVIDER.get((spec["layer"], spec["provider"]), "kubernetes")
        if plugin not in self._plugins_done:
            version = "v" + metadata.version(f"pulumi_{plugin}")
            _guard(spec, lambda: stack.workspace.install_plugin(plugin, version))
            self._plugins_done.add(plugin)
        return stack


def _guard(spec: Mapping[str, Any], call: Callable[[], T]) -> T:
    """Run one Automation API call; turn its errors into UsageError (whole run) or StackFailed (this stack)."""
    name = spec["stack"]
    try:
        return call()
    except FileNotFoundError:  # PulumiCommand runs `pulumi version`; no executable
        raise UsageError("fleet apply needs the Pulumi CLI (`pulumi`), and it could not be run",
                         INSTALL_HINT) from None
    except auto.InvalidVersionError as e:
        raise UsageError(f"the installed Pulumi CLI is too old for this Fleet: {e}", INSTALL_HINT) from None
    except auto.ConcurrentUpdateError as e:
        raise StackFailed(
            f"stack {name} is locked by another update ({_pulumi_errors(str(e))})",
            f"wait for the other `fleet apply`/`pulumi up` to finish and rerun; if none is running, a crashed run "
            f"left the lock: `pulumi cancel --stack {name}` (run in the pulumi/ folder) removes it") from None
    except auto.CommandError as e:
        raise StackFailed(_pulumi_errors(str(e))) from None


_ERROR_LINE = re.compile(r"^\s*(?:std(?:err|out):\s*)?[Ee]rror:\s*(.+)$")
_GENERIC = {"update failed", "preview failed", "refresh failed"}


def _pulumi_errors(text: str, limit: int = 6) -> str:
    """The `error:` lines of Pulumi's output (deduplicated, at most `limit`; the generic "update failed" only
    when nothing says more), else its last line."""
    found: list[str] = []
    for line in text.splitlines():
        m = _ERROR_LINE.match(line)
        if m and m.group(1).strip() not in found:
            found.append(m.group(1).strip())
    specific = [f for f in found if f not in _GENERIC]
    if found:
        return "; ".join((specific or found)[:limit])
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "pulumi failed without a message"


def step_of(meta: auto.StepEventMetadata) -> Step:
    """Pulumi's step metadata -> `Step`: `keys` are the properties forcing a replacement, `diffs` those changed,
    `paths` the detailed diff's property paths (which part of a property changed)."""
    op = meta.op.value if isinstance(meta.op, Enum) else str(meta.op)
    return Step(op, meta.urn, meta.type, tuple(meta.keys or ()), tuple(meta.diffs or ()),
                tuple(sorted(meta.detailed_diff or ())))


def _counts(changes: Mapping[Any, int]) -> dict[str, int]:
    """Change maps keyed by `OpType` (preview) or by plain strings (update summary) -> `{op: count}`."""
    return {(k.value if isinstance(k, Enum) else str(k)): int(v) for k, v in changes.items()}
