"""Stage 7, cost: the plan priced (`model`), checked against budgets (`budget`), one commit's cost for the
history (`history`). The comparison with the base is stage 6, `reconciler/diff.py`.

Pure modules; nothing is imported at package level, so importing one stage does not load the others.
"""
