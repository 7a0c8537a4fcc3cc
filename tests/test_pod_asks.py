"""What a running JobSet's pods ask, read as Kubernetes reckons it (observe/parse.py `pod_asks`), and the
accelerators they hold telling a first cycle without a base plan the gang a job runs (plan/live.py). Each test
fails before its fix."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

from kube_objects import job_objects

from reconciler.kube_rules import ACCELERATOR_RESOURCES
from reconciler.observe.parse import ACCELERATORS, parse_jobset, quantity
from reconciler.observe.wire import decode_page
from reconciler.render.facts import RESOURCE


def _jobset(accel: str = "gpu", per_pod: int = 8) -> tuple[dict[str, Any], dict[str, Any]]:
    """A JobSet (as tests/kube_objects.py builds it: its accelerators as a limit) and its pod spec to edit."""
    js = job_objects("vision", "a", "h100", accel=accel, per_pod=per_pod)[0]
    return js, js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def _asks(js: dict[str, Any]) -> tuple[int | None, int | None]:
    got = parse_jobset(js)
    return got.pod_cpus, got.pod_memory_gib


def _accelerators(js: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
    got = parse_jobset(js)
    return got.pod_cpus, got.pod_memory_gib, got.pod_accelerators


def _container(name: str, requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None,
               **extra: Any) -> dict[str, Any]:
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v is not None}
    return {"name": name, "image": "img:1", "resources": resources, **extra}


def test_init_containers_and_sidecars_count_as_the_scheduler_counts_them() -> None:
    """KEP-753 / component-helpers `PodRequests`: app containers and sidecars (init containers with
    `restartPolicy: Always`) summed; at least each plain init container plus the sidecars started before it.
    Before, only `containers` were read: (4, 16) for a pod the scheduler holds 8 cpus and 32 GiB for."""
    js, pod = _jobset()
    pod["containers"][0]["resources"]["requests"] = {"cpu": "4", "memory": "16Gi"}
    pod["initContainers"] = [_container("fetch", {"cpu": "6", "memory": "1Gi"}),
                             _container("proxy", {"cpu": "1", "memory": "2Gi"}, restartPolicy="Always"),
                             _container("warm", {"cpu": "7", "memory": "30Gi"})]
    # app + sidecar: 5 cpus, 18 GiB; init: fetch 6 / 1, proxy 1 / 2, warm beside proxy 8 / 32
    assert _asks(js) == (8, 32)
    pod["initContainers"][2]["resources"]["requests"] = {"cpu": "2", "memory": "3Gi"}   # warm + proxy: 3 / 5
    assert _asks(js) == (6, 18)          # fetch's 6 cpus; the app and sidecar's 18 GiB
    pod["initContainers"][0]["restartPolicy"] = "Always"      # fetch a sidecar too: 4 + 6 + 1 = 11, 16 + 1 + 2
    assert _asks(js) == (11, 19)


def test_a_resource_stated_only_as_a_limit_is_requested_at_that_limit() -> None:
    """The API server defaults a pod's (not a template's) missing request to its limit. Before, a container with
    limits only read as "not stated" (None), one with a request for cpu and a limit for memory as no memory."""
    js, pod = _jobset()
    pod["containers"][0]["resources"]["limits"].update({"cpu": "3", "memory": "12Gi"})
    assert _asks(js) == (3, 12)
    pod["containers"][0]["resources"]["requests"] = {"cpu": "1"}          # a stated request beats the limit
    pod["initContainers"] = [_container("setup", limits={"memory": "20Gi"})]
    assert _asks(js) == (1, 20)


def test_the_pod_overhead_is_added() -> None:
    """`spec.overhead` (a RuntimeClass's, e.g. a sandbox runtime's) is held on the node beside the containers'.
    Before, it was left out: (4, 8) for a pod the scheduler holds 5 cpus and 9 GiB for."""
    js, pod = _jobset()
    pod["containers"][0]["resources"]["requests"] = {"cpu": "4", "memory": "7.75Gi"}
    pod["overhead"] = {"cpu": "250m", "memory": "512Mi"}
    assert _asks(js) == (5, 9)


def test_pod_level_resources_replace_the_containers_sum() -> None:
    """KEP-2837 (pod-level `resources`): a pod-level request is the pod's; a pod-level limit stands for a request
    of a resource no container states. Before, only the containers counted."""
    js, pod = _jobset()
    pod["containers"][0]["resources"]["requests"] = {"cpu": "4"}
    pod["resources"] = {"requests": {"cpu": "16"}, "limits": {"cpu": "32", "memory": "64Gi"}}
    assert _asks(js) == (16, 64)
    pod["overhead"] = {"cpu": "1"}
    assert _asks(js) == (17, 64)


def test_quantities_follow_apimachinerys_grammar() -> None:
    """`n` and `u` are decimal SI suffixes and `+` a sign; an exponent and a suffix never go together; a request
    is rounded up to a thousandth (1n of a cpu holds 1m). Before, `250u` and `+2` read as not known, `1e3Mi` as
    a quantity, and 2.000000001 cpus as 2 (the pod holds 2.001: 3 whole cpus)."""
    assert [quantity(q) for q in ("250u", "5n", "+2", "2E", "1e-3", ".5", "5.", "-0")] == [
        250e-6, 5e-9, 2.0, 2e18, 1e-3, 0.5, 5.0, 0.0]
    assert [quantity(q) for q in ("1e3Mi", "1e3m", "1K", "2e", "1.5.5", "--1", "-1m", "1 Gi", "Gi")] == [None] * 9
    js, pod = _jobset()
    pod["containers"][0]["resources"]["requests"] = {"cpu": "3500000u", "memory": "17179869184000000000n"}
    assert _asks(js) == (4, 16)
    pod["containers"][0]["resources"]["requests"] = {"cpu": "2.000000001", "memory": "1Gi"}
    assert _asks(js) == (3, 1)
    pod["containers"][0]["resources"]["requests"] = {"cpu": "0.1", "memory": "1Gi"}   # float noise: not rounded up
    pod["containers"].append(_container("side", {"cpu": "0.2", "memory": "1Gi"}))
    pod["containers"].append(_container("more", {"cpu": "0.7"}))
    assert _asks(js) == (1, 2)


def test_the_accelerators_a_pod_holds_are_read_from_limits_or_requests() -> None:
    """`pod_accelerators`: the most accelerators one pod requests, of the resources Fleet's renderer writes (the
    snapshot had no such field: a first cycle could not tell the gang a job runs). A pod that states none holds
    none beside one that does; a JobSet none of whose pods states one has none known."""
    assert ACCELERATORS == frozenset(RESOURCE.values()) == frozenset(ACCELERATOR_RESOURCES.values())
    js, pod = _jobset("tpu", 4)
    assert _accelerators(js) == (None, None, 4)
    js, pod = _jobset("gpu", 2)
    pod["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": 2}}   # render writes an integer
    rj = js["spec"]["replicatedJobs"]
    rj.append(copy.deepcopy(rj[0]))
    rj[1]["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    assert _accelerators(js) == (None, None, 2)
    rj[0]["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    assert _accelerators(js) == (1, None, None)
    js, pod = _jobset("gpu", 16)
    pod["containers"][0]["resources"]["limits"] = {"aws.amazon.com/neuron": "lots"}
    assert _accelerators(js) == (None, None, None)
    pod["containers"][0]["resources"]["limits"] = {"aws.amazon.com/neuron": 10**400, "cpu": "1" * 400}
    assert _accelerators(js) == (None, None, None)          # beyond a float: not known, never a traceback
    pod["containers"][0]["resources"]["limits"] = {"aws.amazon.com/neuron": "16"}
    pod["initContainers"] = [_container("check", limits={"nvidia.com/gpu": "1"})]
    assert _accelerators(js) == (None, None, 16)


def test_a_pruned_page_keeps_everything_pod_asks_reads() -> None:
    """observe/wire.py decodes only the fields parse reads: limits, init containers, `restartPolicy`, overhead
    and pod-level resources must survive it, or `fleet observe` reads less than parse_jobset is tested with."""
    js, pod = _jobset()
    pod["containers"][0]["resources"]["limits"].update({"cpu": "3"})
    pod["initContainers"] = [_container("proxy", {"memory": "2Gi"}, restartPolicy="Always"),
                             _container("warm", limits={"cpu": "9"})]
    pod["overhead"] = {"memory": "1Gi"}
    pod["resources"] = {"limits": {"memory": "40Gi"}}
    got = decode_page("jobsets", json.dumps({"items": [js]}).encode())
    assert got is not None
    (item,), _ = got
    assert parse_jobset(item) == parse_jobset(js)
    assert _accelerators(item) == (9, 3, 8)   # warm's 9 cpus (proxy asks none); proxy's 2 GiB + overhead 1 GiB


def _x(*options: str) -> str:
    return "name: x\nteam: vision\noptions:\n" + "".join(f"  - {o}\n" for o in options) + "image: img:1\n"


EIGHT = "{accelerator: nvidia-h100-80gb, count: 8}"
FOUR = "{accelerator: nvidia-h100-80gb, count: 4}"
GONE = {"fleet/clusters/onprem-sjc.yaml": None, "jobs/vision/small.yaml": None, "jobs/vision/pretrain.yaml": None}


def test_a_first_cycle_without_a_base_re_creates_a_job_whose_file_changed_its_gang() -> None:
    """`x` runs 8 GPUs on node 0; a commit makes it ask 4. With no base plan (the loop's first cycle, no memory),
    live.py took the first option that runs as its gang: `x` was kept silently as a 4-GPU job, the reviewed
    change never carried out, and the waiting 4-GPU `w` placed on node 0, which `x`'s 8 GPUs fill. Its pods'
    accelerators (`pod_accelerators`) now tell the gang it runs: it is re-created as the plan from git does."""
    from test_live import fleet, observed, snapshot, stamped

    from reconciler.pipeline import plan

    from builders import job

    old = fleet({**GONE, "jobs/vision/x.yaml": _x(EIGHT)})
    v = fleet({**GONE, "jobs/vision/x.yaml": _x(FOUR), "jobs/vision/w.yaml": job("w", count=4)})
    git = plan(v, base=plan(old))
    from_git = git.placement_of("vision/x")
    assert from_git is not None and (from_git.status, from_git.reason) == ("moved", "the job's shape changed")
    runs_old = snapshot(60, observed("gke-usc1", stamped(old, "vision/x", "h100", "running", units=(0,),
                                                         accel="gpu", per_pod=8)))
    assert runs_old.clusters[0].jobsets[0].pod_accelerators == 8
    p = plan(v, observed=runs_old)
    live = p.placement_of("vision/x")
    assert live is not None
    assert (live.status, live.reason, live.accelerators_per_unit) == ("moved", "the job's shape changed", 4), live
    assert p.placements == git.placements      # x re-created as 4 GPUs on node 0, w beside it: as from git
    runs_new = snapshot(60, observed("gke-usc1", stamped(v, "vision/x", "h100", "running", units=(0,),
                                                         accel="gpu", per_pod=4)))
    kept = plan(v, observed=runs_new).placement_of("vision/x")
    assert kept is not None and (kept.status, kept.reason, kept.accelerators_per_unit, kept.units) == (
        "kept", "", 4, (0,))


def test_a_first_cycle_keeps_a_job_as_the_option_its_pods_run() -> None:
    """Options swapped (8, then 4 GPUs -> 4, then 8) with no base plan: `x` runs the 8-GPU option, now option 1.
    Before, the first option that runs (4 GPUs) was taken for its gang: kept as a 4-GPU job on the node its 8 GPUs
    fill. Its pods' 8 GPUs pick option 1, kept as it runs, with no reason to move it (the spec it runs is the
    file's: the digest is stamped from the new file). A job whose pods match no option and that runs the file's
    spec is kept as before (what changed is not its file)."""
    from test_live import fleet, observed, snapshot, stamped

    from reconciler.pipeline import plan

    slow_four = "{accelerator: nvidia-h100-80gb, count: 4, relative_speed: 0.3}"
    v = fleet({**GONE, "jobs/vision/x.yaml": _x(slow_four, EIGHT)})
    runs = snapshot(60, observed("gke-usc1", stamped(v, "vision/x", "h100", "running", units=(0,),
                                                     accel="gpu", per_pod=8)))
    x = plan(v, observed=runs).placement_of("vision/x")
    assert x is not None
    assert (x.option, x.accelerators_per_unit, x.units, x.status) == (1, 8, (0,), "kept"), x
    odd = snapshot(60, observed("gke-usc1", stamped(v, "vision/x", "h100", "running", units=(0,),
                                                    accel="gpu", per_pod=2)))
    x = plan(v, observed=odd).placement_of("vision/x")
    assert x is not None and (x.option, x.units, x.status) == (0, (0,), "kept"), x


def test_a_request_too_large_for_thousandths_reads_as_it_is_never_a_traceback() -> None:
    """A request a float holds whose thousandths do not (`1e307`: the JobSet CRD's quantity pattern lets it
    through, as it does `1e400`) reads as what it is, never a traceback out of `fleet observe`: before, rounding
    it up to a thousandth raised OverflowError (float infinity to an integer), and the whole read stopped."""
    js, pod = _jobset()
    for big in ("1e307", 10**307, "1" * 308, "1.5e308"):
        pod["containers"][0]["resources"]["requests"] = {"cpu": big, "memory": "1Gi"}
        cpus, memory = _asks(js)
        assert (cpus, memory) == (math.ceil(float(big)), 1), big
        got = decode_page("jobsets", json.dumps({"items": [js]}).encode())
        assert got is not None and parse_jobset(got[0][0]).pod_cpus == cpus
