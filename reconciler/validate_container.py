"""A job's container rules of stage 3 (see `validate_jobs.py`): what apply or the runtime would refuse, or what
must never be committed. Pure.

The image and the command are judged once per distinct value in a validation (`ContainerMemo`): 100,000 jobs
share a handful of images and commands, and each argument's size and secrets were asked again for every job.
Env values differ from job to job and are judged per job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import kube_rules as kube
from .models import Job
from .problems import Severity, excerpt, printable
from .reporter import Reporter
from .secrets import command_secret

_LONG_HINT = "put long configuration in a file in the image or in a ConfigMap, and pass its path"


@dataclass
class ContainerMemo:
    """What one validation found of each distinct image and command."""

    images: dict[str, str | None] = field(default_factory=dict)
    commands: dict[tuple[str, ...], tuple[int, tuple[tuple[int, int], ...], tuple[tuple[int, str], ...]]] = \
        field(default_factory=dict)


def shown(value: str) -> str:
    """`value` for a message: its start only, and unprintable characters escaped (a newline in an env name
    must not start a forged line of output, whatever the output format)."""
    return printable(excerpt(value))


def check_container(r: Reporter, path: str, job: Job, memo: ContainerMemo) -> None:
    """Image reference, env names, value sizes and secrets in the command."""
    image = job.image
    if image in memo.images:
        why = memo.images[image]
    else:
        why = memo.images[image] = kube.image_problem(image)
    if why is not None:
        r.add(path, ("image",), f"image `{shown(image)}` {why}",
              "write a reference such as us-docker.pkg.dev/project/repo/name:tag or name@sha256:<64 hex digits>")
    command = job.command
    facts = memo.commands.get(command)
    if facts is None:
        facts = memo.commands[command] = _command_facts(command)
    total, too_long, secrets = facts
    for i, size in too_long:
        r.add(path, ("command", i), f"command argument {i} is {size:,} bytes, over the "
              f"{kube.MAX_VALUE_BYTES:,}-byte limit of one value", _LONG_HINT)
    env = job.env
    for key in sorted(env):
        if not kube.ENV_NAME.match(key):
            r.add(path, ("env", key), f"env name `{shown(key)}` is not a C identifier",
                  "use letters, digits and '_', not starting with a digit, e.g. MY_SETTING", key=True)
        if key in kube.RANK_ENV_NAMES:
            r.add(path, ("env", key), f"env `{key}` replaces the value Fleet gives each pod of a multi-node GPU gang "
                  "(its coordinator, rank or size, which torchrun and JAX read)", "remove it unless the job sets up "
                  "its own rendezvous; Fleet sets it from the gang's shape", severity=Severity.WARNING, key=True)
        size = kube.utf8_len(env[key])
        total += kube.utf8_len(key) + size + 2
        if size > kube.MAX_VALUE_BYTES:
            r.add(path, ("env", key), f"env `{shown(key)}` is {size:,} bytes, over the "
                  f"{kube.MAX_VALUE_BYTES:,}-byte limit of one value", _LONG_HINT)
    if total > kube.MAX_CONTAINER_BYTES:
        r.add(path, ("command",) if command else ("env",),
              f"command and env together are {total:,} bytes, over the {kube.MAX_CONTAINER_BYTES:,}-byte limit",
              _LONG_HINT)
    for i, reason in secrets:
        r.add(path, ("command", i), f"command argument {i} {reason}; secrets must not be committed",
              "remove it (and rotate it: git history keeps it); read it from an env var that a Kubernetes Secret "
              "in the team's namespace sets, e.g. `--token-file /var/run/secrets/...`")


def _command_facts(command: tuple[str, ...]) -> tuple[int, tuple[tuple[int, int], ...], tuple[tuple[int, str], ...]]:
    """(bytes the command takes of the container's limit, (index, size) of each argument over one value's limit,
    (index, why) of each argument that looks like a secret)."""
    total = 0
    too_long = []
    for i, arg in enumerate(command):
        size = kube.utf8_len(arg)
        total += size + 1
        if size > kube.MAX_VALUE_BYTES:
            too_long.append((i, size))
    return total, tuple(too_long), tuple(command_secret(command))
