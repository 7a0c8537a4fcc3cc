"""What the Kubernetes API, the JobSet webhook and the container runtime accept, checked before apply. Pure.

Fleet derives objects from a job: the JobSet (named after the job, in the team's namespace), its headless
Service (the JobSet name), the child Jobs `<jobset>-<replicatedJob>-<jobIndex>` and their pods
`<job>-<podIndex>-<5 random characters>` (JobSet defaults every child Job to Indexed completion), and the Kueue
Workload (`jobset-<name>-<hash>`, which Kueue shortens itself). The JobSet webhook rejects a JobSet whose
longest child Job name or longest pod name is not a DNS-1035 label (letters, digits and '-', starting with a
letter, at most 63 characters), and a Service name must be one too. So a job name that starts with a digit, or
that leaves no room for the suffixes, passes an RFC 1123 check and fails only at apply.

Container fields: the runtime parses `image` as a reference (`[host[:port]/]path[:tag][@digest]`, lowercase
path, name at most 255 characters); env names are C identifiers (portable to every shell and runtime); and
command and env values are bounded here so that the JobSet, each child Job and the Kueue Workload, which all
carry the pod template, stay far below the API server's 1.5 MiB object limit, and each string below Linux's
128 KiB limit of one argument or environment string.
"""

from __future__ import annotations

import re

from .resolve import ResolvedOption, ResolvedPool

DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
MAX_LABEL = 63
POD_SUFFIX = "-abcde"
"""The random suffix the Job controller gives each pod; the JobSet webhook counts it with a placeholder."""

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RANK_ENV_NAMES = ("MASTER_ADDR", "MASTER_PORT", "NNODES", "NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
                  "PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE", "JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES",
                  "JAX_PROCESS_ID")
"""The variables render/jobset.py gives every pod of a multi-node GPU gang (coordinator, ranks, sizes); a job's
own value of one replaces Fleet's (the file states it), and validate warns."""

MAX_VALUE_BYTES = 32 * 1024
"""Most bytes of one command argument or env value."""
MAX_CONTAINER_BYTES = 64 * 1024
"""Most bytes of command and env together (every argument, name and value, plus one byte each)."""

# The reference grammar of the container image distribution specification (distribution/reference).
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|-+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,128}"
IMAGE_REFERENCE = re.compile(rf"^(?P<name>{_NAME})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?$")
MAX_IMAGE_NAME = 255


def image_problem(image: str) -> str | None:
    """Why the runtime would refuse `image` as a reference, or None."""
    m = IMAGE_REFERENCE.match(image)
    if m is None:
        if image != image.strip():
            return "has leading or trailing whitespace"
        if IMAGE_REFERENCE.match(image.lower()):
            return "has uppercase letters in its repository path (only the registry host may have them)"
        return "is not a valid image reference ([registry[:port]/]path[:tag][@sha256:digest])"
    if len(m.group("name")) > MAX_IMAGE_NAME:
        return f"has a repository name longer than {MAX_IMAGE_NAME} characters"
    return None


ACCELERATOR_RESOURCES = {"tpu": "google.com/tpu", "gpu": "nvidia.com/gpu", "trainium": "aws.amazon.com/neuron"}
"""Kubernetes extended resource of each accelerator kind (device plugins of GKE TPU, NVIDIA, AWS Neuron): what
render/pods.py requests, and what observe reads back (observe/parse.py `pod_accelerators`)."""


def pod_accelerators(opt: ResolvedOption, pool: ResolvedPool) -> int:
    """The accelerators one pod of `opt` on `pool` requests: all of its node's for a TPU slice or a gang of whole
    nodes, else the option's count (a share of one node)."""
    per_node = pool.unit_accelerators // pool.nodes_per_unit
    return per_node if opt.shape is not None or opt.count >= per_node else opt.count


def child_jobs(opt: ResolvedOption, pool: ResolvedPool, job_replicas: int) -> tuple[str, int, int]:
    """(replicated job name, replicas, pods per child job) of `opt` on `pool`; `fleet validate` checks the
    names the JobSet controller derives from them (below)."""
    per_node = pool.unit_accelerators // pool.nodes_per_unit
    if opt.shape is not None:
        return "slice", opt.slices * job_replicas, pool.nodes_per_unit
    return "worker", job_replicas, opt.count // per_node if opt.count >= per_node else 1


def child_job_name(jobset: str, replicated_job: str, replicas: int) -> str:
    """The longest child Job name the JobSet controller derives (the last index)."""
    return f"{jobset}-{replicated_job}-{replicas - 1}"


def longest_pod_name(jobset: str, replicated_job: str, replicas: int, pods: int) -> str:
    """The longest pod name, as the JobSet webhook computes it (random suffix included)."""
    return f"{child_job_name(jobset, replicated_job, replicas)}-{pods - 1}{POD_SUFFIX}"


def utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


FLEET_NAMESPACE = "fleet-system"
"""Fleet's own namespace (reconcile/deploy.py): the reconciler, its ServiceAccount and Lease, the completion
records (observe/completions.py) and the kubeconfig Secret of every managed cluster."""
RESERVED_NAMESPACES = frozenset({"default", FLEET_NAMESPACE, "kueue-system", "jobset-system", "lws-system"})
"""Besides Kubernetes' own `kube-*`: the default namespace, Fleet's, and those of the controllers Fleet drives
(Kueue, JobSet, LeaderWorkerSet for multi-host inference)."""
FLEET_SERVICE_ACCOUNTS = frozenset({"fleet-reconciler", "fleet-gpu-health"})
"""The ServiceAccounts Fleet runs as (reconcile/deploy.py, render/node_health.py): no job may name one."""
FLEET_SECRETS = frozenset({"fleet-kubeconfig", "fleet-pulumi"})
"""The Secrets that hold Fleet's credentials (reconcile/deploy.py): no job may name one."""


def reserved_namespace(name: str) -> bool:
    """A namespace of Kubernetes itself (`kube-*`), the default one, Fleet's, or one of the controllers Fleet
    drives."""
    return name.startswith("kube-") or name in RESERVED_NAMESPACES
