"""`fleet apply`: rendered stack specs -> Pulumi stacks, infrastructure before Kueue objects before JobSets.

Three small modules, so the order and the failure rules are tested without Pulumi:
- `specs`: `load_specs(dir)`, the one input path (the `stacks/` folder that `fleet render --out` writes).
- `orchestrate`: order, `--stack`, confirmation, per-stack results, stop-after-failed-layer; it talks to
  Pulumi only through the `Engine` protocol.
- `engine`: the Pulumi Automation API (the only module that imports `pulumi.automation`).   EFFECT
"""
