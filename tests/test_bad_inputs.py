"""The bad-input corpus: each case is a small fixture (the base fleet with one file changed) and the exact
file, line, column and message that `fleet validate` must report, with exit code 1 and no traceback."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli

from builders import GKE, JOB, ONPREM, PRIORITIES, TEAMS, job, with_files

V = "jobs/vision/train.yaml"
G = "fleet/clusters/gke-usc1.yaml"
T = "policies/teams.yaml"
OP = "fleet/clusters/onprem-sjc.yaml"
P = "fleet/prices.yaml"
S = "jobs/vision/serve.yaml"
LONG = "very-long-job-name-for-the-vision-team-pretrain"  # 47 characters: one more than the pods leave room for


@dataclass(frozen=True)
class Case:
    name: str
    files: dict[str, str | bytes | None]
    path: str
    line: int
    message: str        # a substring of the message
    col: int | None = None
    hint: str = ""      # a substring of the hint


BILLION_LAUGHS = """\
a: &a ["x","x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]
"""

CASES = [
    # --- YAML syntax and encoding ---------------------------------------------------------------------
    Case("duplicate-key", {V: JOB.replace("team: vision\n", "team: vision\nname: again\n")},
         V, 3, "duplicate key `name` (first defined on line 1)", col=1),
    Case("tab-indent", {V: JOB.replace("  - accelerator: tpu-v5p", "\t- accelerator: tpu-v5p")},
         V, 5, "tab character in indentation", col=1, hint="spaces only"),
    Case("non-utf8", {V: JOB.encode().replace(b"train:1", b"tr\xe9in:1")}, V, 13, "0xe9 is not valid UTF-8", col=31),
    Case("empty-file", {V: "# nothing here\n\n"}, V, 1, "the file is empty"),
    Case("top-level-list", {V: "- name: train\n- team: vision\n"}, V, 1, "the document is a list"),
    Case("alias-bomb", {V: BILLION_LAUGHS}, V, 5, "expands to more than 20,000 values", col=1),
    Case("oversize", {V: "name: x\n" + "# pad\n" * 200_000}, V, 1, "over the 1,048,576-byte limit"),
    Case("two-documents", {V: JOB + "---\nname: other\n"}, V, 16, "more than one YAML document"),
    Case("syntax-error", {V: JOB.replace("command: [python, -m, train]", "command: [python, -m, train")},
         V, 15, "invalid YAML: did not find expected ',' or ']' (in the flow sequence that starts on line 14)"),
    Case("merge-key", {V: "base: &b {team: vision}\n<<: *b\nname: train\n"}, V, 2, "merge keys"),
    Case("recursive-alias", {V: "name: &n [a, *n]\n"}, V, 1, "recursive alias", col=7),
    # --- hostile bytes (issue 10): parser crashes, bytes that are not text ------------------------------------
    Case("deep-flow-nesting", {V: "[" * 3000}, V, 1, "nests deeper than 32 levels", col=33, hint="flatten"),
    Case("deep-block-nesting", {V: "a:\n" + "".join(" " * 2 * i + "- x:\n" for i in range(100)) + "y\n"}, V, 17,
         "nests deeper than 32 levels", col=33),
    Case("huge-integer", {V: JOB.replace("count: 16", "count: " + "9" * 5000)}, V, 9,
         "a 5,000-character number, over the 64-character limit", col=12, hint="quote the value"),
    Case("nul-byte", {V: JOB.replace("image: ", "image: \x00")}, V, 13, "control character U+0000 (NUL)", col=8),
    Case("terminal-escape", {V: JOB.replace("name: train", "name: \x1b[2Jtrain")}, V, 1,
         "control character U+001B (ESC)", col=7, hint="delete it"),
    Case("noncharacter", {V: JOB.replace("vision\n", "vision\ufffe\n", 1)}, V, 2, "noncharacter character U+FFFE",
         col=13),
    Case("cr-only-lines", {V: JOB.replace("\n", "\r")}, V, 1, "carriage return (CR) without a line feed", col=12,
         hint="LF line endings"),
    Case("binary-tag", {V: JOB.replace("image: us-docker.pkg.dev/ml/train:1", "image: !!binary dXMtZG9ja2Vy")},
         V, 13, "explicit tag `!!binary`", col=8, hint="remove the tag"),
    Case("escaped-terminal-code", {V: JOB.replace("WANDB_PROJECT: vision", 'WANDB_PROJECT: "\\e]0;x\\a"')}, V, 15,
         "makes the control character U+001B (ESC)", col=22, hint="remove the escape"),
    # --- document shape ---------------------------------------------------------------------------------
    Case("unknown-field", {V: JOB.replace("priority:", "prioirty:")}, V, 3, "unknown field `prioirty`", col=1,
         hint="did you mean `priority`?"),
    Case("missing-field", {V: JOB.replace("image: us-docker.pkg.dev/ml/train:1\n", "")}, V, 1,
         "missing required field `image`", hint="container image"),
    Case("bad-name", {"jobs/vision/Train_1.yaml": JOB.replace("name: train", "name: Train_1")},
         "jobs/vision/Train_1.yaml", 1, "`Train_1` is not a valid name (RFC 1123 label)", col=7),
    Case("bad-enum", {G: GKE.replace("provider: gcp", "provider: azure")}, G, 2, "`azure` is not a valid provider",
         hint="gcp"),
    Case("list-for-mapping", {G: GKE.replace("kubernetes: {cluster: ml-usc1}", "kubernetes: [ml-usc1]")},
         G, 5, "`kubernetes` must be a mapping", col=13),
    Case("bool-for-count", {V: JOB.replace("count: 16", "count: true")}, V, 9,
         "`count` must be a whole number, not the boolean true"),
    Case("negative-quota", {T: TEAMS.replace("tpu-v5p: {nominal: 128}", "tpu-v5p: {nominal: -1}")}, T, 19,
         "`nominal` must be >= 0, got -1"),
    # --- real numbers: finite, never booleans or strings, within bounds that keep totals finite ----------------
    Case("hourly-usd-inf", {OP: ONPREM.replace("hourly_usd: 40.0", "hourly_usd: .inf")}, OP, 12,
         "`hourly_usd` must be a finite number, not `.inf`", col=17, hint="ordinary number"),
    Case("hourly-usd-huge", {OP: ONPREM.replace("hourly_usd: 40.0", "hourly_usd: 1.0e+300")}, OP, 12,
         "`hourly_usd` must be <= 1000000.0, got 1e+300", col=17),
    Case("hourly-usd-bool", {OP: ONPREM.replace("hourly_usd: 40.0", "hourly_usd: true")}, OP, 12,
         "`hourly_usd` must be a number, not the boolean true", col=17),
    Case("hourly-usd-string", {OP: ONPREM.replace("hourly_usd: 40.0", 'hourly_usd: "40"')}, OP, 12,
         "`hourly_usd` must be a number, not str `40`", col=17, hint="without quotes"),
    Case("yaml-exponent-is-text", {OP: ONPREM.replace("hourly_usd: 40.0", "hourly_usd: 4e1")}, OP, 12,
         "`hourly_usd` must be a number, not str `4e1`", hint="write e.g. 1.0e+6"),
    Case("duration-inf", {V: JOB.replace("duration_hours: 24", "duration_hours: .inf")}, V, 11,
         "`duration_hours` must be a finite number, not `.inf`", col=17),
    Case("duration-bool", {V: JOB.replace("duration_hours: 24", "duration_hours: true")}, V, 11,
         "`duration_hours` must be a number, not the boolean true", col=17),
    Case("duration-over-ten-years", {V: JOB.replace("duration_hours: 24", "duration_hours: 100000")}, V, 11,
         "`duration_hours` must be <= 87600.0, got 100000"),
    Case("checkpoint-minus-inf", {V: JOB.replace("checkpoint_minutes: 30", "checkpoint_minutes: -.inf")}, V, 12,
         "`checkpoint_minutes` must be a finite number, not `-.inf`"),
    Case("relative-speed-inf", {V: JOB.replace("relative_speed: 0.5", "relative_speed: .inf")}, V, 10,
         "`relative_speed` must be a finite number, not `.inf`", col=21),
    Case("relative-speed-nan", {V: JOB.replace("relative_speed: 0.5", "relative_speed: .NaN")}, V, 10,
         "`relative_speed` must be a finite number, not `.nan`"),
    Case("weight-bool", {T: TEAMS.replace("weight: 2", "weight: true")}, T, 9,
         "`weight` must be a number, not the boolean true", col=13),
    Case("weight-zero", {T: TEAMS.replace("weight: 2", "weight: 0")}, T, 9, "`weight` must be >= 0.001, got 0"),
    Case("budget-inf", {T: TEAMS.replace("budget_monthly_usd: 5000000", "budget_monthly_usd: .inf")}, T, 10,
         "`budget_monthly_usd` must be a finite number, not `.inf`"),
    Case("price-override-nan", {P: "prices:\n  - accelerator: nvidia-h100-80gb\n    on_demand_hourly_usd: .nan\n"},
         P, 3, "`on_demand_hourly_usd` must be a finite number, not `.nan`", col=27),
    Case("discount-bool", {P: "discounts:\n  - {accelerator: tpu-v5p, percent_off: yes}\n"}, P, 2,
         "`percent_off` must be a number, not the boolean true"),
    Case("no-options", {V: job("train", body="")
                        .replace("options:\n  - {accelerator: nvidia-h100-80gb, count: 1}\n", "options: []\n")},
         V, 3, "`options` must not be empty"),
    # --- files and references ---------------------------------------------------------------------------
    Case("duplicate-job", {"jobs/vision/copy.yaml": JOB}, V, 1,
         "job `vision/train` is also defined in jobs/vision/copy.yaml"),
    Case("job-in-wrong-folder", {"jobs/lang/other.yaml": JOB.replace("name: train", "name: other")},
         "jobs/lang/other.yaml", 2,
         "job file is in jobs/lang/ but says `team: vision`"),
    Case("job-file-name", {V: None, "jobs/vision/other.yaml": JOB}, "jobs/vision/other.yaml", 1,
         "job `train` is in other.yaml"),
    Case("unknown-team", {"jobs/audio/small.yaml": job(team="audio")}, "jobs/audio/small.yaml", 2,
         "team `audio` does not exist"),
    Case("unknown-priority", {V: JOB.replace("priority: production", "priority: urgent")}, V, 3,
         "priority class `urgent` does not exist"),
    Case("unknown-cohort", {T: TEAMS.replace("    cohort: research\n    max_priority", "    cohort: rsrch\n    max_priority")},
         T, 16, "cohort `rsrch` does not exist"),
    Case("cohort-cycle", {T: TEAMS.replace("  - {name: org}", "  - {name: org, parent: research}")}, T, 3,
         "cohort tree has a cycle: org -> research -> org"),
    Case("lending-over-nominal", {T: TEAMS.replace("lending_limit: 64", "lending_limit: 300")}, T, 12,
         "lending_limit 300 is more than the nominal quota 256"),
    Case("priority-above-team-max", {"jobs/lang/small.yaml": job(team="lang", body="priority: production\n")},
         "jobs/lang/small.yaml", 6, "team `lang` may use priority classes up to `research`, not `production`"),
    Case("default-class-missing", {"policies/priorities.yaml": PRIORITIES.replace("default: research",
                                                                                  "default: normal")},
         "policies/priorities.yaml", 1, "default class `normal` is not among the classes"),
    Case("cluster-file-name", {G: None, "fleet/clusters/gke-other.yaml": GKE}, "fleet/clusters/gke-other.yaml", 1,
         "cluster `gke-usc1` is in fleet/clusters/gke-other.yaml"),
    Case("yml-extension", {"jobs/vision/extra.yml": job("extra")}, "jobs/vision/extra.yml", 1,
         "Fleet reads `.yaml` files only", hint="rename it to jobs/vision/extra.yaml"),
    Case("missing-teams-file", {T: None}, T, 1, "required file is missing"),
    # --- pools -------------------------------------------------------------------------------------------
    Case("invalid-tpu-topology", {G: GKE.replace("topology: 4x4x4", "topology: 3x3x3")}, G, 9,
         "`3x3x3` is not a slice shape of tpu-v5p"),
    Case("topology-machine-mismatch", {G: GKE.replace(
        "    accelerator: tpu-v5p\n    topology: 4x4x4\n",
        "    accelerator: tpu-v5e\n    topology: 4x4\n    machine_type: ct5lp-hightpu-8t\n")}, G, 10,
        "a 4x4 slice of tpu-v5e (16 chips) does not run on `ct5lp-hightpu-8t`", hint="ct5lp-hightpu-4t"),
    Case("min-over-max", {G: GKE.replace("    max: 4\n", "    min: 6\n    max: 4\n")}, G, 10, "min 6 is more than max 4"),
    Case("unknown-accelerator", {G: GKE.replace("accelerator: nvidia-h100-80gb\n    max: 8\n    placement",
                                                "accelerator: nvidia-h900\n    max: 8\n    placement")},
         G, 12, "unknown accelerator `nvidia-h900`"),
    Case("owned-not-fixed", {"fleet/clusters/onprem-sjc.yaml": ONPREM.replace("min: 4", "min: 2")},
         "fleet/clusters/onprem-sjc.yaml", 9, "owned pools have a fixed size, but min 2 != max 4"),
    Case("huge-pool", {"fleet/clusters/onprem-sjc.yaml": ONPREM.replace("min: 4", "min: 100000000000000000000000")
                       .replace("max: 4", "max: 100000000000000000000000")}, "fleet/clusters/onprem-sjc.yaml", 9,
         "`min` must be <= 10000, got 100000000000000000000000"),
    Case("reserved-not-fixed", {G: GKE + "  - name: h100-res\n    accelerator: nvidia-h100-80gb\n    capacity: reserved\n"
                                     "    min: 2\n    max: 6\n"}, G, 22,
         "a reserved pool is paid in full whether used or not, but min 2 != max 6", hint="reservation's size"),
    Case("unpriced-pool", {G: GKE + "  - name: h200\n    accelerator: nvidia-h200-141gb\n    max: 4\n"}, G, 19,
         "cannot be priced: no on-demand price for a3-ultragpu-8g in us-central1", hint="prices.yaml"),
    Case("tpu-on-aws", {"fleet/clusters/eks.yaml": "name: eks\nprovider: aws\nregion: us-east-1\n"
                        "kubernetes: {cluster: eks}\npools:\n  - {name: tpu, accelerator: tpu-v5p, topology: 4x4x4, max: 1}\n"},
         "fleet/clusters/eks.yaml", 6, "TPUs run on GCP only"),
    # --- jobs ----------------------------------------------------------------------------------------------
    Case("job-tpu-topology", {V: JOB.replace("topology: 4x4x4", "topology: 4x4x5")}, V, 6,
         "`4x4x5` is not a slice shape of tpu-v5p"),
    Case("topology-and-count", {V: JOB.replace("topology: 4x4x4", "topology: 4x4x4\n    count: 64")}, V, 6,
         "exactly one of `topology` and `count`"),
    Case("gpu-not-whole-nodes", {V: JOB.replace("count: 16", "count: 12")}, V, 9,
         "12 nvidia-h100-80gb is more than one 8-GPU node but not a whole number of nodes", hint="use 8 or 16"),
    Case("fits-no-pool", {V: JOB.replace("topology: 4x4x4\n    slices: 2", "topology: 8x8x8")
                          .replace("count: 16", "count: 128")}, V, 4,
         "fits no pool in the fleet at all; option 0 (tpu-v5p 8x8x8): closest pool gke-usc1/v5p-4x4x4, "
         "but its slices are 4x4x4, the option needs 8x8x8"),
    Case("replicas-on-training", {V: JOB.replace("duration_hours: 24", "replicas: 3\nduration_hours: 24")}, V, 11,
         "only inference jobs have replicas"),
    Case("residency-without-region", {V: JOB.replace("duration_hours: 24", "data_residency: required\nduration_hours: 24")},
         V, 11, "`data_residency: required` needs a `data_region`", hint="add `data_region: REGION`"),
    Case("spread-on-training", {V: JOB.replace("duration_hours: 24", "spread: zone\nduration_hours: 24")}, V, 11,
         "only inference replicas are spread"),
    Case("spot-class-vs-never", {V: JOB.replace("priority: production", "priority: opportunistic\nspot: never")}, V, 4,
         "requires spot capacity, but the job says `never`"),
    Case("secret-aws-key", {V: JOB.replace("WANDB_PROJECT: vision", "AWS_ID: AKIAABCDEFGHIJKLMNOP")}, V, 15,
         "env `AWS_ID` looks like an AWS access key id"),
    Case("secret-named", {V: JOB.replace("env: {WANDB_PROJECT: vision}", "env:\n  WANDB_API_KEY: 0123456789abcdef")},
         V, 16, "env `WANDB_API_KEY` is named like a credential", hint="Kubernetes Secret"),
    Case("secret-private-key", {V: JOB.replace("env: {WANDB_PROJECT: vision}",
                                               'env:\n  X: "-----BEGIN RSA PRIVATE KEY-----\\nMII"')},
         V, 16, "looks like a private key"),
    # --- production fields (issue 13): names in the team's namespace only, volumes that make sense -------
    Case("secret-hint-names-env-from-secrets",
         {V: JOB.replace("env: {WANDB_PROJECT: vision}", "env:\n  WANDB_API_KEY: 0123456789abcdef")},
         V, 16, "is named like a credential", hint="env_from_secrets: [NAME]"),
    Case("port-on-training", {V: JOB + "port: 8080\n"}, V, 16, "`port` is for inference services",
         hint="kind: inference"),
    Case("port-out-of-range", {S: job("serve", "vision", "kind: inference\nport: 70000\n")}, S, 7,
         "`port` must be <= 65535, got 70000"),
    Case("readiness-without-port", {S: job("serve", "vision", "kind: inference\nreadiness_path: /health\n")}, S, 7,
         "a readiness probe needs the port", hint="port: N"),
    Case("readiness-not-a-path", {S: job("serve", "vision", "kind: inference\nport: 80\nreadiness_path: health\n")},
         S, 8, "`health` is not an HTTP path", hint="/health"),
    Case("max-restarts-negative", {V: JOB + "max_restarts: -1\n"}, V, 16, "`max_restarts` must be >= 0, got -1"),
    Case("max-restarts-bool", {V: JOB + "max_restarts: true\n"}, V, 16,
         "`max_restarts` must be a whole number, not the boolean true"),
    Case("max-restarts-on-inference", {S: job("serve", "vision", "kind: inference\nport: 80\nmax_restarts: 2\n")},
         S, 8, "inference replicas restart for ever"),
    Case("service-account-other-namespace", {V: JOB + "service_account: kube-system/default\n"}, V, 16,
         "`kube-system/default` is not a valid name"),
    Case("pull-secret-twice", {V: JOB + "image_pull_secrets: [regcred, regcred]\n"}, V, 16,
         "Secret `regcred` is listed twice"),
    Case("env-secret-bad-name", {V: JOB + "env_from_secrets: [My_Secret]\n"}, V, 16,
         "`My_Secret` is not a valid name"),
    Case("volume-claim-and-config-map",
         {V: JOB + "volumes:\n  - {name: data, claim: c, config_map: m, mount_path: /data}\n"}, V, 17,
         "needs exactly one of `claim` and `config_map`"),
    Case("volume-host-path", {V: JOB + "volumes:\n  - {name: data, host_path: /var, mount_path: /data}\n"}, V, 17,
         "unknown field `host_path`"),
    Case("volume-under-dev", {V: JOB + "volumes:\n  - {name: data, claim: c, mount_path: /dev/nvidia0}\n"}, V, 17,
         "is under `/dev`, which belongs to the system", hint="/data"),
    Case("volume-relative-path", {V: JOB + "volumes:\n  - {name: data, claim: c, mount_path: data}\n"}, V, 17,
         "is not an absolute path"),
    Case("volume-dot-dot", {V: JOB + "volumes:\n  - {name: data, claim: c, mount_path: /data/../etc}\n"}, V, 17,
         "is not a plain absolute path"),
    Case("volume-config-map-writable",
         {V: JOB + "volumes:\n  - {name: cfg, config_map: m, mount_path: /cfg, read_only: false}\n"}, V, 17,
         "ConfigMap volumes are always read-only"),
    Case("volume-mount-twice", {V: JOB + "volumes:\n  - {name: a, claim: c, mount_path: /data}\n"
                                "  - {name: b, claim: d, mount_path: /data/}\n"}, V, 18,
         "is already used by volume 0"),
    Case("volume-named-dshm", {V: JOB + "volumes:\n  - {name: dshm, claim: c, mount_path: /data}\n"}, V, 17,
         "`dshm` is Fleet's own"),
    # --- what the cluster would reject at apply (Kubernetes API, JobSet webhook, container runtime) --------
    Case("job-name-starts-with-digit", {V: None, "jobs/vision/1train.yaml": JOB.replace("name: train", "name: 1train")},
         "jobs/vision/1train.yaml", 1, "job name `1train` starts with a digit", col=7, hint="start the name with a letter"),
    Case("job-name-too-long-for-pods", {V: None, f"jobs/vision/{LONG}.yaml": JOB.replace("name: train", f"name: {LONG}")},
         f"jobs/vision/{LONG}.yaml", 1, f"a pod would be named `{LONG}-slice-1-15-abcde` (64 characters",
         col=7, hint="at most 46 characters"),
    Case("shared-namespace-collision", {T: TEAMS.replace("  - name: lang\n", "  - name: lang\n    namespace: vision\n"),
                                        "jobs/lang/train.yaml": job("train", team="lang")},
         V, 1, "job `vision/train` and job `lang/train` would both be JobSet `train` in namespace `vision`",
         hint="rename one"),
    Case("reserved-namespace", {T: TEAMS.replace("  - name: lang\n", "  - name: lang\n    namespace: kube-system\n")},
         T, 15, "namespace `kube-system` belongs to the cluster's own components", col=16),
    # --- Fleet's namespace and credentials are Fleet's (issue 21) ---------------------------------------------
    Case("fleet-namespace", {T: TEAMS.replace("  - name: lang\n", "  - name: lang\n    namespace: fleet-system\n")},
         T, 15, "namespace `fleet-system` is Fleet's own (its reconciler, ServiceAccount, Lease, completion records "
         "and the kubeconfig Secret", col=16, hint="namespace: team-lang"),
    Case("shared-namespace", {T: TEAMS.replace("  - name: lang\n", "  - name: lang\n    namespace: vision\n")},
         T, 15, "team `lang` shares namespace `vision` with team `vision` (teams[0])", col=16,
         hint="a namespace of its own"),
    Case("lws-namespace", {T: TEAMS.replace("  - name: lang\n", "  - name: lang\n    namespace: lws-system\n")},
         T, 15, "namespace `lws-system` belongs to the cluster's own components", col=16, hint="lws-system"),
    Case("fleet-service-account", {V: JOB + "service_account: fleet-reconciler\n"}, V, 16,
         "ServiceAccount `fleet-reconciler` is Fleet's own", col=18, hint="team's own"),
    Case("fleet-kubeconfig-secret", {V: JOB + "env_from_secrets: [wandb, fleet-kubeconfig]\n"}, V, 16,
         "Secret `fleet-kubeconfig` holds Fleet's own credentials", col=27, hint="fleet-pulumi"),
    Case("fleet-pulumi-pull-secret", {V: JOB + "image_pull_secrets:\n  - fleet-pulumi\n"}, V, 17,
         "Secret `fleet-pulumi` holds Fleet's own credentials", col=5),
    Case("image-uppercase-path", {V: JOB.replace("ml/train:1", "ml/Train:1")}, V, 13,
         "image `us-docker.pkg.dev/ml/Train:1` has uppercase letters in its repository path", col=8),
    Case("image-not-a-reference", {V: JOB.replace("image: us-docker.pkg.dev/ml/train:1", 'image: "train:1; rm -rf /"')},
         V, 13, "is not a valid image reference", hint="name@sha256"),
    Case("image-tag-too-long", {V: JOB.replace("ml/train:1", "ml/train:" + "1" * 129)}, V, 13,
         "is not a valid image reference"),
    Case("env-name-not-identifier", {V: JOB.replace("env: {WANDB_PROJECT: vision}", "env:\n  WANDB-PROJECT: vision")},
         V, 16, "env name `WANDB-PROJECT` is not a C identifier", col=3),
    Case("env-name-with-newline", {V: JOB.replace("env: {WANDB_PROJECT: vision}", 'env:\n  "A\\nok: no problems found": x')},
         V, 16, "env name `A\\x0aok: no problems found` is not a C identifier", col=3),
    Case("env-value-too-long", {V: JOB.replace("WANDB_PROJECT: vision", "WANDB_PROJECT: " + "v" * 40_000)}, V, 15,
         "env `WANDB_PROJECT` is 40,000 bytes, over the 32,768-byte limit"),
    Case("command-and-env-too-long", {V: JOB.replace("command: [python, -m, train]",
                                                     "command: [" + ", ".join(["x" * 30_000] * 3) + "]")},
         V, 14, "command and env together are 90,"),
    Case("command-secret-flag", {V: JOB.replace("command: [python, -m, train]",
                                                "command: [python, -m, train, --hf-token, hunter2x]")},
         V, 14, "command argument 4 sets `--hf-token`, which is named like a credential, to a literal value", col=42),
    Case("command-secret-format", {V: JOB.replace("command: [python, -m, train]",
                                                  "command: [sh, -c, 'git clone https://bot:s3cret@github.com/o/r']")},
         V, 14, "command argument 2 looks like a URL with a password"),
    Case("command-secret-in-shell", {V: JOB.replace("command: [python, -m, train]",
                                                    "command: [sh, -c, 'export DB_PASSWORD=pw1 && python -m train']")},
         V, 14, "sets `DB_PASSWORD=`, which is named like a credential"),
    Case("short-password", {V: JOB.replace("env: {WANDB_PROJECT: vision}", "env:\n  DB_PASSWORD: hunter2")},
         V, 16, "env `DB_PASSWORD` is named like a credential"),
    Case("gke-pool-name-digit", {G: GKE.replace("  - name: h100\n", "  - name: 8xh100\n")}, G, 11,
         "pool name `8xh100` starts with a digit, and GKE node pool names start with a letter", col=11),
    Case("gke-gpu-pool-name-too-long", {G: GKE.replace("  - name: h100\n", f"  - name: h100-{'x' * 40}\n")}, G, 11,
         "is 45 characters; a GKE node pool name has at most 40", hint="at most 40"),
    Case("owner-newline", {T: TEAMS.replace('owners: ["@org/vision"]', 'owners: ["@org/vision\\n* @attacker"]')},
         T, 7, "teams[0].owners[0] '@org/vision\\n* @attacker' is not a GitHub user or team handle", hint="@org/team"),
    Case("admin-with-space", {T: TEAMS.replace('admins: ["@org/fleet-admins"]', 'admins: ["@org/fleet-admins @evil"]')},
         T, 1, "is not a GitHub user or team handle"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_located_and_rejected(case: Case, tmp_path: Path) -> None:
    for rel, content in with_files(case.files).items():
        target = tmp_path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    result = CliRunner().invoke(cli, ["validate", "--repo", str(tmp_path), "--format", "json"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    import json

    problems = [p for p in json.loads(result.output)["problems"] if p["severity"] == "error"]
    hits = [p for p in problems if p["path"] == case.path and case.message in p["message"]]
    assert hits, f"expected {case.path}:{case.line}: {case.message!r}; got {problems}"
    hit = hits[0]
    assert hit["line"] == case.line, hit
    if case.col is not None:
        assert hit["col"] == case.col, hit
    assert case.hint in hit["hint"], hit
    assert hit["hint"], "every error says how to fix it"


def test_a_bad_list_item_is_not_also_reported_as_an_empty_list(tmp_path: Path) -> None:
    """pydantic also flags a list whose only item failed as "too short"; the user must see the item's error only."""
    import json

    files = with_files({V: JOB.replace("    slices: 2\n", "    slicez: 2\n").replace(
        "  - accelerator: nvidia-h100-80gb\n    count: 16\n    relative_speed: 0.5\n", "")})
    for rel, content in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(content)
    result = CliRunner().invoke(cli, ["validate", "--repo", str(tmp_path), "--format", "json"])
    assert result.exit_code == 1, result.output
    messages = [(p["path"], p["line"], p["message"]) for p in json.loads(result.output)["problems"]]
    assert messages == [(V, 7, "unknown field `slicez`")], messages


@pytest.mark.parametrize("verb", [["plan", "--format", "json"], ["cost", "--format", "json"], ["explain", "vision/train"]])
def test_an_infinite_price_is_rejected_by_every_verb(verb: list[str], tmp_path: Path) -> None:
    """`.inf` once passed validation: `plan --format json` printed `Infinity` (not JSON), `cost` crashed."""
    files = with_files({OP: ONPREM.replace("hourly_usd: 40.0", "hourly_usd: .inf")})
    for rel, content in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(content)
    result = CliRunner().invoke(cli, [*verb, "--repo", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert "Infinity" not in result.output and "internal error" not in result.output, result.output
    assert f"{OP}:12:17" in result.output, result.output


def test_an_inference_job_without_a_port_is_warned_about(tmp_path: Path) -> None:
    """Its Service is headless and it gets no readiness probe: a warning on `kind`, not an error."""
    import json

    files = with_files({S: job("serve", "vision", "kind: inference\n")})
    for rel, content in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(content)
    result = CliRunner().invoke(cli, ["validate", "--repo", str(tmp_path), "--format", "json"])
    assert result.exit_code == 0, result.output
    warnings = [(p["path"], p["line"], p["severity"]) for p in json.loads(result.output)["problems"]
                if "without `port`" in p["message"]]
    assert warnings == [(S, 6, "warning")]


def test_a_spot_quota_without_a_spot_pool_is_warned_about(tmp_path: Path) -> None:
    """The builders' fleet sells H100s as spot but no TPU v5p: a v5p `spot:` quota admits nothing anywhere."""
    import json

    teams = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 64, spot: 8}") \
        .replace("lending_limit: 64}", "lending_limit: 64, spot: 32}")
    warnings = [(p["path"], p["line"], p["severity"], p["message"]) for p in _warnings(tmp_path, {T: teams})
                if "spot quota" in p["message"]]
    assert warnings == [(T, 12, "warning", "team `vision` has a spot quota of 32 tpu-v5p, but no pool of the fleet "
                         "sells tpu-v5p as spot capacity (outside clusters that are down): its spot-only jobs have "
                         "nowhere to run")]
    (tmp_path / G).write_text(GKE.replace("provider: gcp\n", "provider: gcp\nstatus: down\n"))
    result = CliRunner().invoke(cli, ["validate", "--repo", str(tmp_path), "--format", "json"])
    down = [p["message"].split(",")[0] for p in json.loads(result.output)["problems"] if "spot quota" in p["message"]]
    assert down == ["team `vision` has a spot quota of 32 tpu-v5p", "team `vision` has a spot quota of 8 "
                    "nvidia-h100-80gb"], "the only H100 spot pool is in a cluster that is down"


def _warnings(tmp_path: Path, changed: dict[str, str | None]) -> list[dict[str, object]]:
    """`fleet validate --format json`'s problems of the builders' repository with `changed` files; no error."""
    import json

    for rel, content in with_files(changed).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(content)
    result = CliRunner().invoke(cli, ["validate", "--repo", str(tmp_path), "--format", "json"])
    assert result.exit_code == 0, result.output
    return list(json.loads(result.output)["problems"])


def test_an_option_repeating_an_earlier_shape_is_warned_about(tmp_path: Path) -> None:
    """An option asking the shape of an earlier one (the same accelerator, slice or count, slices, cpus and memory)
    runs on the same pools at the same prices, so the planner never picks it, or, at another relative_speed (two
    speeds for one shape), never the slower of the two, as it ranks options by cost per unit of work. Both were
    accepted without a word (forty-first session's review), and `fleet explain` listed each pool twice; the first
    form of the warning named the later option even where it was the faster (this session's review)."""
    text = JOB.replace("    relative_speed: 0.5\n", "    relative_speed: 0.5\n"
                       "  - {accelerator: tpu-v5p, count: 64, slices: 2}\n"
                       "  - {accelerator: nvidia-h100-80gb, count: 16, relative_speed: 0.4}\n"
                       "  - {accelerator: nvidia-h100-80gb, count: 16, relative_speed: 0.4, cpus: 32}\n"
                       "  - {accelerator: nvidia-h100-80gb, count: 16, relative_speed: 0.8, cpus: 32}\n")
    found = [(p["path"], p["line"], p["severity"], p["message"]) for p in _warnings(tmp_path, {V: text})
             if "asks for the shape" in p["message"]]
    assert found == [
        (V, 11, "warning", "option 2 asks for the shape of option 0 (tpu-v5p 4x4x4, 2 slices); the planner never "
         "picks option 2"),
        (V, 12, "warning", "option 3 asks for the shape of option 1 (16x nvidia-h100-80gb) at relative_speed 0.4 "
         "against its 0.5: one shape runs the job at one speed; the planner never picks option 3"),
        (V, 14, "warning", "option 5 asks for the shape of option 4 (16x nvidia-h100-80gb) at relative_speed 0.8 "
         "against its 0.4: one shape runs the job at one speed; the planner never picks option 4")], found
