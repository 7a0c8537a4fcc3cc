"""Stage 7, cost: the plan priced (`model`), compared with the base (`diff`), checked against budgets (`budget`).

Pure modules, importing nothing at package level (the planner's summary imports `model.paid_units`).
"""
