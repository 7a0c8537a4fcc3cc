"""Slurm clusters as a target (DESIGN 4e): a cluster with `provider: slurm` reached through slurmrestd.

- `rules`: the validation rules of Slurm clusters, pools and job options (pure);
- `submit`: a placed job's slurmrestd v0.0.38 job-submit document and its batch script (pure; `fleet render`
  writes them, the reconciler sends them);
- `client`: slurmrestd over HTTP (EFFECT: network), every failure an answer, never an exception;
- `observe`: Slurm jobs and nodes read into the same snapshot as Kubernetes clusters (EFFECT: network; the
  mapping itself, `parse`, is pure);
- `act`: the actuator that submits, cancels and requeues on Slurm, beside the Kubernetes one (EFFECT).
- `records`: the durable completion records of Slurm jobs, in the lease cluster's `fleet-completions-slurm`
  ConfigMap (EFFECT: the Kubernetes API), so a job slurmctld forgot is not submitted again.

How Slurm maps onto Fleet: a pool is a partition (its nodes, sorted by name, are the pool's units 0..n-1; Fleet
never resizes it), a team is an account (`account_prefix` + team), a priority class a QOS of the same name, and
a job Fleet submitted carries `fleet.dev/job=<team>/<job>` in its comment, by which it is found again; Fleet
never touches a job without it.
"""

SUBMITTED_TAG = "fleet.dev/job"
