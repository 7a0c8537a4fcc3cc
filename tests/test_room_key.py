from pathlib import Path

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.plan import plan
from reconciler.plan.greedy import run
from reconciler.plan.state import Fleet, PlanState

from builders import job, with_files

REPO = Path(__file__).resolve().parents[1]


def test_a_training_job_is_not_kept_off_a_pool_by_an_inference_job_of_its_shape_that_cannot_use_it() -> None:
    """The "no room" memo is per shape and kind: an inference job has no Slurm pool among its candidates, so
    finding no room does not say a training job of the same shape finds none (it runs on the Slurm node)."""
    files = with_files({"fleet/clusters/gke-usc1.yaml": None, "jobs/vision/train.yaml": None,
                        "jobs/vision/big.yaml": job("big", count=32, body="priority: production\n"),
                        "fleet/clusters/slurm-sjc.yaml": (REPO / "fleet/clusters/slurm-sjc.yaml").read_text(),
                        "jobs/vision/a-serve.yaml": job("a-serve", count=8, body="kind: inference\n"),
                        "jobs/vision/b-train.yaml": job("b-train", count=8, body="kind: training\n")})
    v = check(files, load_catalog())
    assert v.ok, v.errors
    greedy = run(PlanState(Fleet.of(v), None))   # the default run, alone (large fleets skip the improvement phase)
    for p in (greedy, plan(v)):
        where = {x.job: f"{x.cluster}/{x.pool}" for x in p.placements}
        assert where == {"vision/big": "onprem-sjc/h100-owned", "vision/b-train": "slurm-sjc/h100"}
        assert [x.job for x in p.pending] == ["vision/a-serve"]
