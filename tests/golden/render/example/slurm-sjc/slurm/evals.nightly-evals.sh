#!/bin/bash
# fleet.dev/job=evals/nightly-evals: submitted by Fleet
set -euo pipefail
exec srun --ntasks-per-node=1 --container-image=us-docker.pkg.dev/ml-org/images/evals:2026.11 python -m evals.run --suite nightly
