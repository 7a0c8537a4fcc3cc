"""Stage 7, cost: the plan priced (`model`), compared with the base (`diff`), checked against budgets (`budget`).

Pure modules; nothing is imported at package level, so importing one stage does not load the others.
"""
