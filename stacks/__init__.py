"""Pulumi programs, one per provider, fed only by the stack specs that `fleet render` writes.

`program_for(spec)` is the one entry point (DESIGN.md section 5, step 9): it checks the spec against the
contract and routes by (layer, provider) to a small module. The modules import their cloud SDK only when the
program runs, so planning an AWS stack never loads the GCP SDK (hundreds of megabytes of generated code) and
importing `stacks` costs nothing.

    layer   provider  module               what it manages
    infra   gcp       stacks.gcp           GKE node pools (one per TPU slice, one per GPU pool)
    infra   aws       stacks.aws           EKS managed node groups
    infra   onprem    stacks.onprem        nothing; exports the expected pools for drift checks
    kueue   any       stacks.kubernetes    Kueue objects through a Kubernetes provider for the cluster

The `jobs` specs are no Pulumi stacks: JobSets and the objects render writes beside them go to each cluster by
server-side apply (`reconciler/apply/jobs.py`, field manager `fleet`), so that the fields Kueue owns stay
Kueue's and a running job is never part of a stack's state or its drift check. `program_for` refuses them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .spec import SpecError, validate_spec

Program = Callable[[], None]


def program_for(spec: dict[str, Any]) -> Program:
    """The inline Pulumi program (a callable of no arguments) for one parsed stack spec."""
    validate_spec(spec, spec.get("stack", "<stack spec>") if isinstance(spec, dict) else "<stack spec>")
    layer, provider = spec["layer"], spec["provider"]
    if layer == "jobs":
        raise SpecError(spec["stack"], "layer", "jobs are applied by server-side apply (`fleet apply` after the "
                        "stacks), never through Pulumi: a stack would own the fields Kueue writes")
    if layer == "kueue":
        from . import kubernetes

        return kubernetes.program(spec)
    if provider == "gcp":
        from . import gcp

        return gcp.program(spec)
    if provider == "aws":
        from . import aws

        return aws.program(spec)
    from . import onprem  # validate_spec admits no other provider

    return onprem.program(spec)


__all__ = ["Program", "SpecError", "program_for", "validate_spec"]
