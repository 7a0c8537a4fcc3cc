#!/bin/bash
# fleet.dev/job=interp/activation-dump: submitted by Fleet
set -euo pipefail
exec srun --ntasks-per-node=1 --container-image=us-docker.pkg.dev/ml-org/images/interp:2026.11 python -m interp.dump_activations --model atlas-70b
