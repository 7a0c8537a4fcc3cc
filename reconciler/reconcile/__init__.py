"""`fleet reconcile`: the live loop (DESIGN 3, 5 step 11).

- `decide`: the plan compared with what runs -> actions, and the loop's memory.          pure
- `act`: the `Actuator` protocol and `execute`, the order actions run in.                 pure
- `kube_act`: the actuator of real clusters (server-side apply, delete, Events, Pulumi).   EFFECT
- `lease`: one writer at a time (a coordination.k8s.io/v1 Lease).                         EFFECT
- `loop`: observe -> load the repository -> plan -> decide -> act -> record, every cycle.  EFFECT
"""
