"""Seeded generator of large, valid fleets written as real YAML files (the layout of DESIGN.md).

    python bench/generate.py OUT_DIR --clusters 200 --pools 1000 --teams 50 --jobs 10000 --seed 7

Every pool is one the catalog can price (region and capacity chosen from priced combinations), every job
fits at least one pool, so the generated repository validates clean and exercises the whole validator.
Pure function `generate()` returns `{path: text}`; `main()` writes it.
"""

from __future__ import annotations

import argparse
import random
import shutil
from pathlib import Path

# (accelerator, provider, region, shapes or machine types) that the catalog prices, from catalog.yaml.
TPU_REGIONS = {
    "tpu-v5p": (["us-central1", "us-east1", "us-east5", "europe-west4"], ["2x2x1", "2x2x2", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8"]),
    "tpu-v5e": (["us-central1", "us-east1", "us-west1", "us-east5", "us-west4"], ["1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "16x16"]),
    "tpu-v6e": (["us-central1", "us-east1", "us-west1", "us-east5", "us-east4", "europe-west4"], ["1x1", "2x2", "4x4", "8x8", "16x16"]),
}
GCP_GPU = [("nvidia-h100-80gb", "a3-highgpu-8g", ["us-central1"]), ("nvidia-h100-80gb", "a3-megagpu-8g", ["us-east4", "us-east5"]),
           ("nvidia-a100-40gb", "a2-highgpu-8g", ["us-central1"])]
AWS_GPU = [("nvidia-h100-80gb", "p5.48xlarge"), ("nvidia-h200-141gb", "p5en.48xlarge"), ("nvidia-l4", "g6.12xlarge"),
           ("nvidia-b200", "p6-b200.48xlarge"), ("aws-trainium", "trn1.32xlarge")]


def generate(clusters: int, pools: int, teams: int, jobs: int, seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    files: dict[str, str] = {}
    accelerators = sorted({a for a in TPU_REGIONS} | {a for a, _, _ in GCP_GPU} | {a for a, _ in AWS_GPU})
    team_names = [f"team-{i:03d}" for i in range(teams)]
    lines = ['admins: ["@org/fleet-admins"]', "cohorts:", "  - {name: org}"]
    lines += [f"  - {{name: group-{g}, parent: org}}" for g in range(max(1, teams // 10))]
    lines.append("teams:")
    for i, t in enumerate(team_names):
        lines += [f"  - name: {t}", f'    owners: ["@org/{t}"]', f"    cohort: group-{i % max(1, teams // 10)}",
                  f"    weight: {rng.choice([1, 1, 2, 3])}", f"    budget_monthly_usd: {rng.randrange(50, 5000) * 1000}",
                  "    quota:"]
        for acc in accelerators:
            nominal = rng.choice([64, 128, 256, 512, 1024])
            lines.append(f"      {acc}: {{nominal: {nominal}, borrowing_limit: {nominal // 2}, lending_limit: {nominal // 4}}}")
    files["policies/teams.yaml"] = "\n".join(lines) + "\n"
    files["policies/priorities.yaml"] = (
        "default: research\nclasses:\n  - {name: critical, value: 10000, preemptible: false}\n"
        "  - {name: production, value: 1000}\n  - {name: research, value: 100}\n"
        "  - {name: opportunistic, value: 10, spot: required}\n")

    catalog_pools: list[dict[str, object]] = []
    per_cluster = [pools // clusters + (1 if i < pools % clusters else 0) for i in range(clusters)]
    for c in range(clusters):
        kind = rng.choices(["tpu", "gpu", "aws"], weights=[4, 3, 2])[0]
        name = f"c{c:03d}-{kind}"
        if kind == "aws":
            provider, region = "aws", "us-east-1"
        elif kind == "tpu":
            provider, region = "gcp", rng.choice(TPU_REGIONS["tpu-v5e"][0][:3])
        else:
            provider = "gcp"
            region = rng.choice(["us-central1", "us-east4", "us-east5"])
        out = [f"name: {name}", f"provider: {provider}", f"region: {region}", f"kubernetes: {{cluster: k8s-{c:03d}}}", "pools:"]
        for p in range(per_cluster[c]):
            capacity = rng.choice(["on-demand", "on-demand", "spot"])
            if kind == "tpu":
                candidates = [a for a, (regions, _) in TPU_REGIONS.items() if region in regions]
                acc = rng.choice(candidates)
                shape = rng.choice(TPU_REGIONS[acc][1])
                pool = {"accelerator": acc, "topology": shape, "max": rng.randint(1, 16)}
            elif kind == "gpu":
                acc, mt, _ = rng.choice([g for g in GCP_GPU if region in g[2]])
                pool = {"accelerator": acc, "machine_type": mt, "max": rng.randint(4, 64)}
            else:
                acc, mt = rng.choice(AWS_GPU)
                pool = {"accelerator": acc, "machine_type": mt, "max": rng.randint(4, 64)}
            pname = f"p{p:02d}-{capacity}"
            fields = ", ".join(f"{k}: {v}" for k, v in pool.items())
            out.append(f"  - {{name: {pname}, capacity: {capacity}, {fields}}}")
            catalog_pools.append({**pool, "capacity": capacity})
        files[f"fleet/clusters/{name}.yaml"] = "\n".join(out) + "\n"

    for j in range(jobs):
        team = rng.choice(team_names)
        pool = rng.choice(catalog_pools)
        spot = "allowed" if pool["capacity"] == "spot" else rng.choice(["never", "allowed"])
        if "topology" in pool:
            slices = rng.randint(1, min(2, int(pool["max"])))  # type: ignore[call-overload]
            option = f"{{accelerator: {pool['accelerator']}, topology: {pool['topology']}, slices: {slices}}}"
        else:
            per_node = 4 if pool["machine_type"] == "g6.12xlarge" else 16 if pool["accelerator"] == "aws-trainium" else 8
            count = rng.choice([1, 2, per_node, per_node * 2, per_node * 4])
            option = f"{{accelerator: {pool['accelerator']}, count: {count}}}"
        kind = rng.choice(["training", "training", "batch", "inference"])
        body = [f"name: job-{j:05d}", f"team: {team}", f"priority: {rng.choice(['production', 'research', 'research'])}",
                f"kind: {kind}", "options:", f"  - {option}"]
        if rng.random() < 0.3:
            body.append("  - {accelerator: nvidia-h100-80gb, count: 8, relative_speed: 0.7}")
        if kind == "inference":
            body.append(f"replicas: {rng.randint(1, 4)}")
        body += [f"spot: {spot}", f"duration_hours: {rng.choice([1, 4, 24, 72, 168])}",
                 f"checkpoint_minutes: {rng.choice([10, 30, 60])}", "image: us-docker.pkg.dev/ml/train:2026.11",
                 "command: [python, -m, train]", f"env: {{RUN: job-{j:05d}, SEED: '{rng.randrange(1000)}'}}"]
        files[f"jobs/{team}/job-{j:05d}.yaml"] = "\n".join(body) + "\n"
    return files


def write(out: Path, files: dict[str, str]) -> None:
    if out.exists():
        shutil.rmtree(out)
    for rel, text in files.items():
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--clusters", type=int, default=200)
    ap.add_argument("--pools", type=int, default=1000)
    ap.add_argument("--teams", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    files = generate(a.clusters, a.pools, a.teams, a.jobs, a.seed)
    write(a.out, files)
    print(f"wrote {len(files)} files to {a.out}")


if __name__ == "__main__":
    main()
