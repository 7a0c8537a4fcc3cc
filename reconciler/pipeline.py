"""The pure pipeline as a library, stage by stage (DESIGN.md section 5). Pure.

Every caller runs the stages through these functions and nothing below them: the CLI (`fleet validate`,
`plan`, `explain`, `cost`, `render`, `apply`), `cost --history` (`cost_point`), and later
`reconcile` and `simulate`. So the stages run the same way everywhere, and each side of a comparison is
planned and priced exactly once.

    check(files, catalog)                 1-3  load and validate          -> Validated
    plan(head, base=, observed=, now=, solver=)  4  placement, pools, quotas, from what runs -> Plan
    price(plan, validated)                7    the plan's cost            -> Priced
    diff(base, head)                      6    what the change does       -> PlanDiff
    budget_check(head, base)              7    teams over budget          -> (BudgetViolation, ...)
    render(validated, plan, catalog)      5    Kueue, JobSets, stack specs -> {path: text}
    change(head, base, solver=)           4, 7, 6 and budgets for one head against its base -> Change
    cost_point(commit, ..., files, catalog) 1-4, 7 for one commit of `cost --history` -> HistoryPoint
    checked_point(commit, ..., validated)    4, 7 for one commit already checked (history_reuse.py) -> HistoryPoint
    ownership_check(base_files, head_files, ...)   who may change what (`fleet check`) -> (Violation, ...)
    codeowners(files)                              `.github/CODEOWNERS` from policies/teams.yaml -> text
    plan_markdown, cost_report, explain   8    what the commands print

The planner's inputs are keyword arguments after the repository (`base=`, `solver=`): the observed live
state of stage 10 (`observe`) joins them as one more keyword when it exists, without changing any caller.
Stages are imported where they are used, so `fleet validate` does not load the planner or the renderer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from .catalog import Catalog
from .gcpause import paused_gc
from .load import TEAMS, ParseCache, load
from .validate import Validated, validate

if TYPE_CHECKING:
    from datetime import datetime

    from .cost.budget import BudgetViolation
    from .cost.history import HistoryPoint
    from .cost.model import Priced
    from .diff import PlanDiff
    from .observe.model import Snapshot
    from .ownership import Author, Violation
    from .plan.live import LiveInputs
    from .plan.types import Plan
    from .report import CostReport
    from .robots.plan import DeploymentChange

Solver = Literal["greedy", "exact"]
"""greedy: the planner; exact: the CP-SAT optimum for small fleets (slow; for checking the greedy one)."""


def check(files: Mapping[str, bytes], catalog: Catalog, cache: ParseCache | None = None) -> Validated:
    """1. load: parse and build the documents (unchanged files from `cache`, when given).  2. validate:
    cross-document and domain rules."""
    with paused_gc():   # one pause for both: no full collector scan of the loaded repository between them
        return validate(load(files, cache), catalog, cache)


def plan(head: Validated, *, base: Plan | None = None, observed: Snapshot | None = None,
         now: datetime | None = None, solver: Solver = "greedy", for_people: bool = True) -> Plan:
    """4. Where every job runs and how big every pool is; jobs of the `base` plan stay where they were.
    With `observed` (a `fleet observe` snapshot), the plan starts from what runs (plan/live.py): running jobs
    stay, finished ones release their capacity, failed units and lost clusters are avoided, as of `now`
    (default: when the snapshot was taken). `for_people=False`: without the pending jobs' expected starts and
    measured reasons (plan/planner.py `plan`), for a caller that only acts on the plan."""
    live = live_inputs(head, observed, now) if observed is not None else None
    if solver == "exact":
        from .plan.exact import plan_exact
        from .problems import UsageError

        if live is not None:
            raise UsageError("the exact solver does not plan from an observed snapshot",
                             "drop `--solver exact` or `--observed`")
        return plan_exact(head, base)
    from .plan import plan as plan_greedy

    return plan_greedy(head, base, live, for_people=for_people)


def live_inputs(head: Validated, observed: Snapshot, now: datetime | None = None) -> LiveInputs:
    """4a. The snapshot as the planner's inputs: what runs, finished, failed, evicted; failed units; lost clusters."""
    from .plan.live import live_inputs as inputs

    return inputs(head, observed, now)


def price(planned: Plan, v: Validated) -> Priced:
    """7. The plan (made from `v`) priced: every pool and job, by team, cluster and accelerator."""
    from .cost.model import price as price_plan

    return price_plan(planned, v)


def diff(base: Priced, head: Priced) -> PlanDiff:
    """6. Everything the change does: jobs started, moved, preempted; pools and quotas; cost deltas."""
    from .diff import diff_plans

    return diff_plans(base, head)


def budget_check(head: Priced, base: Priced | None = None) -> tuple[BudgetViolation, ...]:
    """7. The teams whose planned monthly cost exceeds their budget, with the jobs the change starts or moves."""
    from .cost.budget import budget_violations

    return budget_violations(head, base)


def render(v: Validated, planned: Plan, catalog: Catalog, observed: Snapshot | None = None) -> dict[str, str]:
    """5. Kueue objects, JobSets and stack specs of the plan: `{relative path: text}`, deterministic; and the
    Rancher Fleet GitRepos of k3s robots' admitted waves (as far as `observed` rollouts went: robots/render.py)."""
    from .render import render as render_plan

    return render_plan(v, planned, catalog, observed.robots if observed else None)


def monitoring(v: Validated) -> dict[str, str]:
    """5b. `monitoring/prometheus-rules.yaml` and `monitoring/grafana-dashboard.json` from policies/slos.yaml
    (without one: the fleet alerts at their defaults, no objectives)."""
    from .observability.dashboard import dashboard_json
    from .observability.rules import rules_yaml
    from .observability.slos import SlosDoc

    doc = v.loaded.slos or SlosDoc()
    return {"monitoring/prometheus-rules.yaml": rules_yaml(doc),
            "monitoring/grafana-dashboard.json": dashboard_json(doc)}


@dataclass(frozen=True)
class Change:
    """The head planned against its base: each side planned and priced once, compared, checked for budgets.
    Without a base, `base` and `diff` are None and the budget check sees the head alone."""

    head: Priced
    base: Priced | None
    diff: PlanDiff | None
    budget_violations: tuple[BudgetViolation, ...]
    robots: tuple[DeploymentChange, ...] = ()    # with a base: deployments it adds, edits or removes (robots/plan.py)


def change(head: Validated, base: Validated | None = None, *, solver: Solver = "greedy",
           observed: Snapshot | None = None, now: datetime | None = None) -> Change:
    """Plan the base first (on its own), then the head sticking to it; price both; diff; check budgets.
    With `observed`, both sides start from what runs."""
    with paused_gc():   # pure stages over a large live heap: no full collector scans between them
        base_priced = price(plan(base, observed=observed, now=now), base) if base is not None else None
        head = respecced(head, base)
        head_priced = price(plan(head, base=base_priced.plan if base_priced else None, observed=observed, now=now,
                                 solver=solver), head)
        from .robots.plan import robot_changes

        return Change(head_priced, base_priced, diff(base_priced, head_priced) if base_priced else None,
                      budget_check(head_priced, base_priced),
                      robot_changes(head.loaded, base.loaded) if base is not None else ())


def respecced(head: Validated, base: Validated | None) -> Validated:
    """`head` with the jobs whose file changed what their pods run since `base` (`Validated.respec`): the fields
    of models.POD_FIELDS that differ, by name (0.3 s CPU at 100,000 jobs, bench/out/fleet-100000 against itself)."""
    if base is None:
        return head
    from .models import POD_FIELDS, pod_fields

    was = base.job_by_id
    names = tuple(POD_FIELDS)
    changed: dict[str, str] = {}
    for job in head.loaded.jobs:
        old = was.get(job.id)
        if old is None or old is job:
            continue
        raw_old, raw_new = old.__dict__, job.__dict__     # a pydantic model's fields: read at once, not by attribute
        if all(raw_old[f] == raw_new[f] for f in names):
            continue
        before, now = pod_fields(old), pod_fields(job)     # as render writes them: reordered env is no change
        if fields := sorted(f for f, value in now.items() if before[f] != value):
            changed[job.id] = ", ".join(fields)
    return replace(head, respec=changed) if changed else head


def plan_markdown(c: Change) -> str:
    """8. `fleet plan`'s Markdown: the plan, and with a base the change's headline, diff and budget breaches."""
    from .plan.markdown import to_markdown
    from .robots.plan import robots_markdown

    summary = None
    if c.diff is not None:
        from .impact import impact
        from .report import diff_markdown, impact_headline  # jinja2 and the templates: only with a change

        i = impact(c.head, c.base, c.diff)
        summary = robots_markdown(c.robots) + f"**{impact_headline(i)}**\n\n" + \
            diff_markdown(c.diff, c.budget_violations, i)
    return to_markdown(c.head.plan, summary)


def cost_report(c: Change, head_label: str, base_label: str,
                history: tuple[HistoryPoint, ...] = (), as_of: datetime | None = None) -> CostReport:
    """8. `fleet cost`'s report of the change (with the cost of earlier commits, from `cost --history`);
    `as_of` dates the budget forecast to the end of its month."""
    from . import __version__
    from .report import CostReport

    return CostReport(c.head, head_label, c.base, base_label, c.diff, c.budget_violations, history, __version__,
                      as_of, c.robots)


def explain(head: Validated, job: str, base: Validated | None = None, *, fmt: str = "md",
            observed: Snapshot | None = None, now: datetime | None = None, applied: Plan | None = None,
            planned_from: str = "") -> str:
    """8. Why `job` is placed where it is, or waits: the head planned against the base's plan (without a base,
    against `applied`, the last applied plan, so what apply placed stays placed), from what runs with
    `observed`, then read (`md`: the story, after the line `planned_from` that says what it was planned from;
    `json`: the same as a document, with that line as `planned_from`)."""
    import json

    if planned_from and fmt == "json":
        doc = json.loads(explain(head, job, base, fmt=fmt, observed=observed, now=now, applied=applied))
        return json.dumps({"planned_from": planned_from, **doc}, indent=2) + "\n"
    if planned_from:
        return planned_from + "\n\n" + explain(head, job, base, fmt=fmt, observed=observed, now=now, applied=applied)

    from .plan.explain import explain as explain_job
    from .plan.explain import explain_doc
    from .plan.planner import plan_with_state

    live = live_inputs(head, observed, now) if observed is not None else None
    if live is not None and job in live.done:     # not planned at all: nothing to weigh
        result_word = live.done[job]
        why = (f"it {result_word} with the spec its file has now (the clusters' Workloads or completion records): "
               "it is not planned and its capacity is free; change its file to run it again, or remove the file "
               "(`fleet gc`)")
        if fmt == "json":
            return json.dumps({"job": job, "finished": result_word, "reason": why}, indent=2) + "\n"
        return f"# {job}\n\nFinished: {why}.\n"
    result, state = plan_with_state(respecced(head, base), plan(base, observed=observed, now=now)
                                    if base is not None else applied, live)   # as `change` plans the head
    if fmt == "json":   # json.dumps escapes every control and non-ASCII character
        return json.dumps(explain_doc(result, state, job), indent=2) + "\n"
    return explain_job(result, state, job)


def cost_point(commit: str, date: str, subject: str, files: Mapping[str, bytes], catalog: Catalog,
               cache: ParseCache | None = None) -> HistoryPoint:
    """One commit of `cost --history`: its files checked, planned on their own (no base) and priced. A commit
    that does not validate is a point with its error count and no cost. `cache`: the parses of files whose
    bytes an earlier commit had too (consecutive commits share almost every file)."""
    return checked_point(commit, date, subject, check(files, catalog, cache))


def checked_point(commit: str, date: str, subject: str, v: Validated) -> HistoryPoint:
    """`cost_point` of the commit's checked files."""
    from .cost.history import HistoryPoint

    if not v.ok:
        return HistoryPoint(commit, date, subject, len(v.errors))
    c = price(plan(v, for_people=False), v)   # a point is its cost and counts: no reasons or expected starts
    return HistoryPoint(commit, date, subject, 0, c.cost.hourly_usd, c.cost.idle_hourly_usd,
                        c.plan.counts().placed, c.plan.counts().pending, dict(c.cost.by_team))


def ownership_check(base_files: Mapping[str, bytes], head_files: Mapping[str, bytes], author: Author,
                    tree_changed: Iterable[str], base_label: str) -> tuple[Violation, ...]:
    """`fleet check`: every change from the base's files to the head's that `author` may not make alone,
    decided by the base's policies (never the change's own). Raises RejectedError when the base's
    policies/teams.yaml does not load, since then nobody can decide."""
    from .ownership import check_change
    from .problems import RejectedError

    base = load(base_files)
    if base.teams is None:
        why = "does not load" if TEAMS in base_files else "does not exist"
        raise RejectedError(f"{TEAMS} of the base revision {base_label} {why}, so ownership cannot be decided",
                            "ownership comes from the base, never from the change itself: merge a valid "
                            f"{TEAMS} first (an admin's bootstrap commit)")
    return check_change(base_files, head_files, base, load(head_files), author, tree_changed)


def codeowners(files: Mapping[str, bytes]) -> str:
    """`.github/CODEOWNERS` of the repository's policies/teams.yaml (RejectedError when it does not load)."""
    from .codeowners import codeowners as codeowners_of
    from .problems import RejectedError

    teams = load(files).teams
    if teams is None:
        raise RejectedError(f"{TEAMS} is missing or invalid", "run `fleet validate` and fix what it reports")
    return codeowners_of(teams)
