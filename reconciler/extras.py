"""The optional parts of Fleet, and the message when one is missing. Pure.

The light install (`pip install .`) carries what validate, plan, explain, cost, status, submit and logs need.
Pulumi's SDKs (hundreds of megabytes of generated providers) come with `.[apply]`, OR-Tools with `.[exact]`;
`.[dev]` has both. The modules that need them import them lazily and turn a missing one into `missing`: exit 2,
naming the extra to install, never a traceback.
"""

from __future__ import annotations

from .problems import UsageError

EXTRAS = {
    "apply": "Pulumi's Automation API and providers (pulumi, pulumi-gcp, pulumi-aws, pulumi-kubernetes)",
    "exact": "OR-Tools (CP-SAT)",
}


def missing(extra: str, what: str, error: ImportError) -> UsageError:
    """The usage error of `what` needing the extra `extra`, whose module `error.name` is not installed."""
    module = error.name or str(error)
    return UsageError(f"{what} needs the `{extra}` extra, {EXTRAS[extra]}: the module `{module}` is not installed",
                      f"install it: `.venv/bin/pip install -e '.[{extra}]'` in a checkout (or "
                      f"`pip install 'fleet[{extra}]'`); requirements/{'apply' if extra == 'apply' else 'dev'}.txt "
                      "locks it")
