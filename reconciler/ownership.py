"""Ownership and policy checks of a change: who may change what (`fleet check`). Pure.

A change is the difference between two loaded revisions, the base and the head, of the data folders. Every
rule is decided with `policies/teams.yaml` and `policies/priorities.yaml` *of the base*, so a pull request
cannot grant itself rights by editing them in the same change.

Rules (each violation names the file, the rule and who could approve it):
- `admin-only`: only `admins` change `fleet/` and `policies/` (and files directly under `jobs/`), and
  anything outside the three data folders: `.github/` (the workflows that run these checks, CODEOWNERS)
  and the tool's own code and configuration (`reconciler/`, `pyproject.toml`, ...). Otherwise a pull
  request could rewrite the check, or the code that runs it, in the same change it is checked for.
- `team-folder`: a team's owners change only `jobs/<team>/`: adding, editing or deleting a job there. A job
  moved from one team's folder to another is a deletion in one and an addition in the other, so it needs
  the owners of both. A folder of a team the base does not know needs an admin. Every changed path counts,
  also one Fleet does not read (a hidden file, a submodule): it is in the team's folder all the same.
- `team-deployment`: a deployment (`deployments/<name>.yaml`) is changed by the owners of its team, like a job;
  `robots/` (the sites' robots) is admin-only like `fleet/`.
- `quota-raise`, `budget-raise`, `priority-ceiling-raise`, `new-team`: a team's quota (nominal or
  borrowing limit; no limit counts as infinite), monthly budget or `max_priority` goes up, or a team is
  added. `new-priority-class`, `priority-class-raise`: a class is added or its value goes up. They need an
  admin. `policies/` is admin-only already; these name *what* the change raises, so the reviewer sees it.
- `priority-ceiling`: an added or edited job uses a priority class above its team's `max_priority` as the
  base defines it (the same rule as `fleet validate`, see `validate_jobs.above_ceiling`, applied with the
  base's policies).
Admins may change everything: for them the head's own validation (`fleet validate`) is what applies.

Who is the author: GitHub handles cannot be resolved offline. An owner entry without a slash (`alice` or
`@alice`) is a user and matches the author's login; an entry `@org/team` matches when the caller lists
`org/team` among the author's teams (the workflow asks the GitHub API for the membership of each team
handle of the base's teams.yaml). Matching is case-insensitive, like GitHub's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .load import PRIORITIES, TEAMS, Loaded, Unreadable
from .models import PrioritiesDoc, Quota, Team, TeamsDoc
from .problems import printable
from .validate_jobs import above_ceiling

ADMIN_ROOTS = ("fleet/", "policies/", "robots/")
DATA_ROOTS = ("fleet/", "policies/", "jobs/", "robots/", "deployments/")
OUTSIDE = ("anything outside fleet/, policies/, jobs/, robots/ and deployments/ (workflows, CODEOWNERS, the tool's "
           "code and config)")


def normalize(handle: str) -> str:
    """`@Org/Team` -> `org/team`, `@Alice` -> `alice`: GitHub handles compare case-insensitively."""
    return handle.strip().removeprefix("@").lower()


@dataclass(frozen=True)
class Author:
    """The person whose change is checked: a login and the `org/team` handles they are known to belong to."""

    login: str
    teams: frozenset[str] = frozenset()

    @staticmethod
    def of(login: str, teams: Iterable[str] = ()) -> Author:
        return Author(normalize(login), frozenset(normalize(t) for t in teams if t.strip()))

    def matches(self, handle: str) -> bool:
        h = normalize(handle)
        return h in self.teams if "/" in h else h == self.login

    def is_any(self, handles: Iterable[str]) -> bool:
        return any(self.matches(h) for h in handles)


@dataclass(frozen=True, order=True)
class Violation:
    """One change the author may not make alone. Ordered by file, line, rule for stable reports."""

    path: str
    line: int
    rule: str
    message: str
    approvers: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "line": self.line, "rule": self.rule, "message": self.message,
                "approvers": list(self.approvers)}


def _edited(base: Mapping[str, bytes], head: Mapping[str, bytes]) -> tuple[str, ...]:
    """Paths added, deleted or modified between the two file maps, sorted; not the entries that stand for what the
    readers do not read (a hidden file, a submodule or nested clone), whose identity differs between the work tree
    and a commit and which git ignores where `.gitignore` says so: `tree_changed` names those where they change."""
    base, head = _compared(base), _compared(head)
    return tuple(sorted(p for p in set(base) | set(head) if base.get(p) != head.get(p)))


_STAND_INS = (b"hidden:", b"nested:", b"submodule:")


def _compared(files: Mapping[str, bytes]) -> Mapping[str, bytes]:
    if not any(isinstance(b, Unreadable) and b.startswith(_STAND_INS) for b in files.values()):
        return files
    return {p: b for p, b in files.items() if not (isinstance(b, Unreadable) and b.startswith(_STAND_INS))}


def _unique(handles: Iterable[str]) -> tuple[str, ...]:
    seen: set[str] = set()
    out = []
    for h in handles:
        if normalize(h) not in seen:
            seen.add(normalize(h))
            out.append(h)
    return tuple(out)


def check_change(base_files: Mapping[str, bytes], head_files: Mapping[str, bytes], base: Loaded, head: Loaded,
                 author: Author, tree_changed: Iterable[str]) -> tuple[Violation, ...]:
    """Every violation of the change from `base` to `head` by `author`, sorted.

    `base_files` and `head_files` are the data folders' files; `tree_changed` is every changed path of the
    whole tree (`sources.changed_paths`), of which the ones outside the data folders are admin-only.
    `base.teams` must have loaded (the caller refuses to decide ownership without it)."""
    teams_doc = base.teams
    assert teams_doc is not None
    admins = teams_doc.admins
    if author.is_any(admins):
        return ()
    changed = _edited(base_files, head_files)
    verbs = [(p, "adds" if p not in base_files else "deletes" if p not in head_files else "edits") for p in changed]
    # what the readers skip inside the data folders (a hidden file, a submodule not checked out) is a change
    # of that folder all the same: before, `jobs/<other team>/.x` or a gitlink there needed nobody's approval
    verbs += [(p, "changes") for p in sorted(set(tree_changed) - set(changed)) if p.startswith(DATA_ROOTS)]
    owners: dict[str, set[str | None]] = {p: set() for p in changed if p.startswith("deployments/")}
    for side in (base, head):      # a deployment's team on either side: moving it between teams needs both
        for p, d in side.deployments:
            if p in owners:
                owners[p].add(d.owner_team)
    out = _path_rules(verbs, teams_doc, author, owners)
    out += [Violation(p, 1, "admin-only", f"`{author.login}` changes {p}, but only fleet admins change {OUTSIDE}",
                      _unique(admins)) for p in sorted(set(tree_changed)) if not p.startswith(DATA_ROOTS)]
    if TEAMS in changed and head.teams is not None:
        out += _team_raises(teams_doc, head.teams, head, admins)
    if PRIORITIES in changed and base.priorities is not None and head.priorities is not None:
        out += _class_raises(base.priorities, head.priorities, head, admins)
    if base.priorities is not None:
        out += _ceilings(set(changed), teams_doc, base.priorities, head, admins)
    return tuple(sorted(set(out)))


def _path_rules(changes: list[tuple[str, str]], doc: TeamsDoc, author: Author,
                deployment_teams: Mapping[str, set[str | None]]) -> list[Violation]:
    """`changes` are (path, verb) with verb `adds`, `edits` or `deletes`; `deployment_teams` the owning team of
    each changed deployment file, in the base and the head (None: no team, admins only)."""
    admins = doc.admins
    teams = {t.name: t for t in doc.teams}
    out = []
    for path, verb in changes:
        parts = path.split("/")
        did = f"`{author.login}` {verb} {path}"
        if parts[0] == "deployments":
            out += _deployment_rule(path, did, deployment_teams.get(path) or {None}, teams, admins, author)
            continue
        if path.startswith(ADMIN_ROOTS) or (parts[0] == "jobs" and len(parts) == 2):
            where = f"{parts[0]}/" if parts[0] != "jobs" else "jobs/ outside a team folder"
            out.append(Violation(path, 1, "admin-only", f"{did}, but only fleet admins change {where}",
                                 _unique(admins)))
            continue
        team = teams.get(parts[1])
        if team is None:
            out.append(Violation(path, 1, "team-folder", f"{did}, but jobs/{parts[1]}/ is not the folder of a team "
                                 "in the base policies/teams.yaml; only admins add teams", _unique(admins)))
        elif not author.is_any(team.owners):
            out.append(Violation(path, 1, "team-folder", f"{did}, but is not an owner of team `{team.name}`: its "
                                 f"owners (or an admin) change jobs/{team.name}/", _unique((*team.owners, *admins))))
    return out


def _deployment_rule(path: str, did: str, owners: set[str | None], teams: Mapping[str, Team],
                     admins: tuple[str, ...], author: Author) -> list[Violation]:
    """`team-deployment`: a deployment's file is changed by the owners of its team (its `team`, else the team of
    `model.from_job`), on both sides of the change; one without a team, or of a team the base does not know, by
    admins only."""
    out = []
    for name in sorted(owners, key=str):
        team = teams.get(name) if name else None
        if team is None:
            out.append(Violation(path, 1, "team-deployment", f"{did}, a deployment of no team the base "
                                 "policies/teams.yaml knows; only admins change it (set `team:` to a team)",
                                 _unique(admins)))
        elif not author.is_any(team.owners):
            out.append(Violation(path, 1, "team-deployment", f"{did}, but is not an owner of team `{team.name}`, "
                                 "whose deployment it is", _unique((*team.owners, *admins))))
    return out


def _line(head: Loaded, path: str, fld: tuple[str | int, ...]) -> int:
    return head.locate(path, fld)[0]


def _at(team: Team, i: int, name: str) -> tuple[str | int, ...]:
    """The field's path if the team sets it, else the team's own entry (a removed field has no line)."""
    return ("teams", i, name) if name in team.model_fields_set else ("teams", i)


def _more(new: float | None, old: float | None) -> bool:
    """Is `new` a raise over `old`, where None means no limit (infinite)?"""
    if new is None:
        return old is not None
    return old is not None and new > old


def _fmt(v: float | None) -> str:
    return "no limit" if v is None else f"{v:g}"


def _team_raises(base: TeamsDoc, head: TeamsDoc, loaded: Loaded, admins: tuple[str, ...]) -> list[Violation]:
    old = {t.name: t for t in base.teams}
    out = []
    approvers = _unique(admins)
    for i, t in enumerate(head.teams):
        b = old.get(t.name)
        if b is None:
            out.append(Violation(TEAMS, _line(loaded, TEAMS, ("teams", i, "name")), "new-team",
                                 f"adds team `{t.name}` (quota, budget and priority ceiling of its own)", approvers))
            continue
        if _more(t.budget_monthly_usd, b.budget_monthly_usd):
            out.append(Violation(TEAMS, _line(loaded, TEAMS, _at(t, i, "budget_monthly_usd")), "budget-raise",
                                 f"raises the monthly budget of team `{t.name}` from {_fmt(b.budget_monthly_usd)} "
                                 f"to {_fmt(t.budget_monthly_usd)} USD", approvers))
        if t.max_priority != b.max_priority and _ceiling_raised(b, t, loaded.priorities):
            out.append(Violation(TEAMS, _line(loaded, TEAMS, _at(t, i, "max_priority")), "priority-ceiling-raise",
                                 f"raises the max_priority of team `{t.name}` from `{b.max_priority or 'none'}` "
                                 f"to `{t.max_priority or 'no ceiling'}`", approvers))
        out += _quota_raises(t, b, i, loaded, approvers)
    return out


def _ceiling_raised(before: Team, after: Team, priorities: PrioritiesDoc | None) -> bool:
    if after.max_priority is None:
        return True
    if before.max_priority is None:
        return False
    values = {c.name: c.value for c in priorities.classes} if priorities else {}
    return values.get(after.max_priority, 0) > values.get(before.max_priority, 0) \
        or after.max_priority not in values


def _quota_raises(t: Team, b: Team, i: int, loaded: Loaded, approvers: tuple[str, ...]) -> list[Violation]:
    out = []
    for acc in sorted(t.quota):
        q, old = t.quota[acc], b.quota.get(acc, Quota(nominal=0, borrowing_limit=0))
        for name in ("nominal", "borrowing_limit"):
            new_v, old_v = getattr(q, name), getattr(old, name)
            if _more(new_v, old_v) if name == "borrowing_limit" else new_v > old_v:
                at: tuple[str | int, ...] = ("teams", i, "quota", acc)
                at = (*at, name) if name in q.model_fields_set else at
                out.append(Violation(TEAMS, _line(loaded, TEAMS, at), "quota-raise", f"raises the {acc} {name} of "
                                     f"team `{t.name}` from {_fmt(old_v)} to {_fmt(new_v)}", approvers))
        # A spot: quota is room beside nominal; none means spot-only work counts against nominal, so stating
        # one above 0 (or a larger one) gives the team more (`spot: 0` keeps its spot-only work out: a cut).
        if q.spot is not None and q.spot > (old.spot or 0):
            at = ("teams", i, "quota", acc, "spot")
            was = "none (spot-only work counted against nominal)" if old.spot is None else f"{old.spot:g}"
            out.append(Violation(TEAMS, _line(loaded, TEAMS, at), "quota-raise", f"raises the {acc} spot quota of "
                                 f"team `{t.name}` from {was} to {q.spot:g}", approvers))
    return out


def _class_raises(base: PrioritiesDoc, head: PrioritiesDoc, loaded: Loaded,
                  admins: tuple[str, ...]) -> list[Violation]:
    old = {c.name: c for c in base.classes}
    out = []
    for i, c in enumerate(head.classes):
        line = _line(loaded, PRIORITIES, ("classes", i))
        if c.name not in old:
            out.append(Violation(PRIORITIES, line, "new-priority-class",
                                 f"adds priority class `{c.name}` (value {c.value})", _unique(admins)))
        elif c.value > old[c.name].value:
            out.append(Violation(PRIORITIES, line, "priority-class-raise", f"raises priority class `{c.name}` from "
                                 f"{old[c.name].value} to {c.value}", _unique(admins)))
    return out


def _ceilings(changed: set[str], base: TeamsDoc, prio: PrioritiesDoc, head: Loaded,
              admins: tuple[str, ...]) -> list[Violation]:
    teams = {t.name: t for t in base.teams}
    classes = {c.name: c for c in prio.classes}
    out = []
    for job in head.jobs:
        path = head.job_paths[job.id]
        if path not in changed or job.team not in teams:
            continue
        name = job.priority or prio.default
        line = _line(head, path, ("priority",) if job.priority else ("name",))
        approvers = _unique(admins)
        if name not in classes:
            out.append(Violation(path, line, "priority-ceiling", f"uses priority class `{name}`, which the base "
                                 "policies/priorities.yaml does not define", approvers))
            continue
        ceiling = above_ceiling(classes[name], teams[job.team], classes)
        if ceiling is not None:
            out.append(Violation(path, line, "priority-ceiling", f"team `{job.team}` may use priority classes up to "
                                 f"`{ceiling.name}`, not `{name}`", approvers))
    return out


# --- reports ------------------------------------------------------------------------------------------------


def _who(approvers: tuple[str, ...]) -> str:
    return ", ".join(approvers) if approvers else "nobody (the base policies/teams.yaml lists no admins)"


def text(violations: tuple[Violation, ...], author: Author) -> str:
    if not violations:
        return f"ok: `{author.login}` may make every change\n"
    # paths and messages quote the change (a file name is the pull request's bytes): escaped, so they can
    # neither drive the terminal nor forge a line of their own
    lines = [printable(f"{v.path}:{v.line}: {v.rule}: {v.message}") + f"\n    approvers: {printable(_who(v.approvers))}"
             for v in violations]
    lines.append(f"{len(violations)} ownership violation(s) by `{author.login}`")
    return "\n".join(lines) + "\n"


def _esc(s: str, prop: bool = False) -> str:
    s = printable(s).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return s.replace(":", "%3A").replace(",", "%2C") if prop else s


def github(violations: tuple[Violation, ...], author: Author) -> str:
    """Workflow commands: each violation shows on the pull request's diff, at its file and line."""
    return "".join(f"::error file={_esc(v.path, True)},line={v.line},title={_esc('fleet check: ' + v.rule, True)}::"
                   f"{_esc(v.message)}. Approvers: {_esc(_who(v.approvers))}\n" for v in violations)


def as_json(violations: tuple[Violation, ...], author: Author) -> str:
    doc = {"ok": not violations, "author": author.login, "author_teams": sorted(author.teams),
           "violations": [v.as_dict() for v in violations]}
    return json.dumps(doc, indent=2) + "\n"
