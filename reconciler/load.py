"""Stage 2, load: `{path: bytes}` in, typed documents and every located problem out. Pure.

Files are classified by path (the layout in DESIGN.md section 1), parsed strictly (`yamlio`), and built
into the frozen models; pydantic's errors are translated into `Problem`s that point at the key or value in
the file and say how to fix it. A document that fails is left out and the rest still load, so one run
reports every error; `validate.py` then skips the checks that need a missing document.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from .gcpause import paused_gc
from .models import Cluster, Job, PlacementDoc, PricesDoc, PrioritiesDoc, TeamsDoc
from .notify.model import NOTIFICATIONS, NotificationsDoc
from .observability.slos import SlosDoc
from .problems import Problem, Severity, excerpt, format_field
from .robots.models import Deployment, RobotFleet
from .yamlio import ParsedDoc, Positions, parse

TEAMS, PRIORITIES, PLACEMENT, PRICES = (
    "policies/teams.yaml", "policies/priorities.yaml", "policies/placement.yaml", "fleet/prices.yaml")
_SINGLETONS: dict[str, type[BaseModel]] = {
    TEAMS: TeamsDoc, PRIORITIES: PrioritiesDoc, PLACEMENT: PlacementDoc, PRICES: PricesDoc}
SLOS = "policies/slos.yaml"
_SINGLETONS[SLOS] = SlosDoc
_SINGLETONS[NOTIFICATIONS] = NotificationsDoc
_CLUSTER = re.compile(r"^fleet/clusters/([^/]+)\.yaml$")
_JOB = re.compile(r"^jobs/([^/]+)/([^/]+)\.yaml$")
_ROBOTS = re.compile(r"^robots/([^/]+)\.yaml$")
_DEPLOYMENT = re.compile(r"^deployments/([^/]+)\.yaml$")
DATA_DIRS = ("fleet/", "policies/", "jobs/", "robots/", "deployments/")


class Unreadable(bytes):
    """A path of the data folders that `sources` did not read: a symbolic link, a special file, a submodule,
    a file where a folder belongs, a file over the size limit, or a hidden file named like a YAML file (a
    warning: `warn`). Its bytes identify it for change detection (`ownership`), never parsed; `load` reports it
    as a problem of its path."""

    message: str
    hint: str
    warn: bool

    def __new__(cls, identity: str, message: str, hint: str, warn: bool = False) -> Unreadable:
        self = super().__new__(cls, identity.encode())
        self.message, self.hint, self.warn = message, hint, warn
        return self

    def __reduce__(self) -> tuple[type[Unreadable], tuple[str, str, str, bool]]:   # crosses to worker processes
        return Unreadable, (bytes(self).decode(), self.message, self.hint, self.warn)


@dataclass(frozen=True)
class Loaded:
    """The repository's documents as models, with where each came from.

    `clusters` and `jobs` are sorted by name / id. Optional documents that are absent get their defaults;
    a required or present document that failed to load is None (its problems are in `problems`)."""

    clusters: tuple[Cluster, ...]
    jobs: tuple[Job, ...]
    teams: TeamsDoc | None
    priorities: PrioritiesDoc | None
    placement: PlacementDoc | None
    prices: PricesDoc | None
    problems: tuple[Problem, ...]
    docs: Mapping[str, ParsedDoc] = field(repr=False)
    cluster_paths: Mapping[str, str] = field(repr=False)
    job_paths: Mapping[str, str] = field(repr=False)
    slos: SlosDoc | None = None        # policies/slos.yaml (optional): None only when present and broken
    notifications: NotificationsDoc | None = None   # policies/notifications.yaml (optional), likewise
    # robots/<fleet>.yaml and deployments/<name>.yaml (DESIGN 4d), sorted by path; each with its path
    robot_fleets: tuple[tuple[str, RobotFleet], ...] = ()
    deployments: tuple[tuple[str, Deployment], ...] = ()
    # the documents Fleet reads that did not load (unreadable, not YAML, or not a valid model), by path: checks
    # that would read them are skipped rather than reported as follow-on errors (validate.py)
    unloaded: frozenset[str] = frozenset()

    @property
    def fleet_whole(self) -> bool:
        """Every cluster file loaded: a rule over the whole fleet (a job fits some pool, a cluster is in a region,
        a cluster is named) can be judged; else it is skipped, the broken file's own errors saying why."""
        return not any(p.startswith("fleet/clusters/") or p in ("fleet/", "fleet/clusters") for p in self.unloaded)

    def locate(self, path: str, fld: tuple[str | int, ...], *, key: bool = False) -> tuple[int, int]:
        doc = self.docs.get(path)
        return doc.locate(fld, key=key) if doc else (1, 1)


@dataclass
class ParseCache:
    """Each file's parse (without its data: `ParsedDoc.without_data`) and build, kept by its bytes between loads
    (`fleet reconcile` loads the repository every cycle; between merges few of its 10,000 files change). A file
    whose bytes differ is parsed again; files no longer present are dropped. The documents and models are
    immutable, so sharing them is safe."""

    entries: dict[str, tuple[bytes, ParsedDoc | Problem, Any, tuple[Problem, ...]]] = field(default_factory=dict)
    checks: Any = None      # each job's validation, kept likewise (`validate_jobs.JobChecks`, set by `validate`)


def load(files: Mapping[str, bytes], cache: ParseCache | None = None) -> Loaded:
    """Parse and build every document in `files` (posix paths relative to the repository root)."""
    with paused_gc():
        return _load(files, cache)


def _parse_and_build(path: str, raw: bytes, model: type[BaseModel],
                     cache: ParseCache | None) -> tuple[ParsedDoc | Problem, Any, tuple[Problem, ...]]:
    """(the parse or its problem, the model or None, the build's problems) of one file, from `cache` when its
    bytes are the same."""
    if cache is not None:
        hit = cache.entries.get(path)
        if hit is not None and hit[0] == raw:
            return hit[1], hit[2], hit[3]
    parsed = parse(path, raw)
    found: list[Problem] = []
    if isinstance(parsed, Problem):
        built = None
    else:   # nothing reads the plain data after the build (at 100,000 jobs about 120 MB of the 500 MB loaded)
        built, parsed = build(model, parsed, found), parsed.without_data()
    if cache is not None:
        cache.entries[path] = (bytes(raw), parsed, built, tuple(found))
    return parsed, built, tuple(found)


def _load(files: Mapping[str, bytes], cache: ParseCache | None = None) -> Loaded:
    problems: list[Problem] = []
    docs: dict[str, ParsedDoc] = {}
    clusters: dict[str, Cluster] = {}
    jobs: dict[str, Job] = {}
    singles: dict[str, Any] = {}
    cluster_paths: dict[str, str] = {}
    job_paths: dict[str, str] = {}
    unloaded: set[str] = set()

    for path in sorted(files):
        unread = files[path]
        if isinstance(unread, Unreadable):
            problems.append(Problem(path, 1, 1, unread.message, hint=unread.hint,
                                    severity=Severity.WARNING if unread.warn else Severity.ERROR))
            if not unread.warn:     # a hidden file is no document of the repository (its warning says so)
                unloaded.add(path)
            continue
        told = len(problems)
        model = _classify(path, problems)
        if model is None:
            if len(problems) > told:    # misplaced YAML (`fleet/clusters/x.yml`): a document that did not load
                unloaded.add(path)
            continue
        parsed, built, found = _parse_and_build(path, files[path], model, cache)
        if isinstance(parsed, Problem):
            problems.append(parsed)
            unloaded.add(path)
            continue
        docs[path] = parsed
        problems.extend(found)
        if built is None:
            unloaded.add(path)
            continue
        if isinstance(built, Cluster):
            if built.name in clusters:
                problems.append(_twice(path, parsed, f"cluster `{built.name}`", cluster_paths[built.name]))
                continue
            clusters[built.name] = built
            cluster_paths[built.name] = path
        elif isinstance(built, Job):
            job_id = built.id   # a property: made once
            if job_id in jobs:
                problems.append(_twice(path, parsed, f"job `{job_id}`", job_paths[job_id]))
                continue
            jobs[job_id] = built
            job_paths[job_id] = path
        else:
            singles[path] = built

    if cache is not None:
        for gone in [p for p in cache.entries if p not in files]:
            del cache.entries[gone]
    for required in (TEAMS, PRIORITIES):
        if required not in files:
            problems.append(Problem(required, 1, 1, "required file is missing",
                                    hint=f"create {required}; see DESIGN.md section 2 for its fields"))

    def single(path: str, default: Any) -> Any:
        return singles.get(path) if path in files else default

    return Loaded(
        clusters=tuple(clusters[k] for k in sorted(clusters)),
        jobs=tuple(jobs[k] for k in sorted(jobs)),
        teams=single(TEAMS, None),
        priorities=single(PRIORITIES, None),
        placement=single(PLACEMENT, PlacementDoc()),
        prices=single(PRICES, PricesDoc()),
        problems=tuple(problems),
        docs=docs,
        cluster_paths=cluster_paths,
        unloaded=frozenset(unloaded),
        job_paths=job_paths,
        slos=single(SLOS, SlosDoc()),
        notifications=single(NOTIFICATIONS, NotificationsDoc()),
        robot_fleets=tuple((p, d) for p, d in sorted(singles.items()) if isinstance(d, RobotFleet)),
        deployments=tuple((p, d) for p, d in sorted(singles.items()) if isinstance(d, Deployment)),
    )


def _twice(path: str, parsed: ParsedDoc, what: str, first: str) -> Problem:
    line, col = parsed.locate(("name",))
    return Problem(path, line, col, f"{what} is also defined in {first}",
                   field="name", hint="names are unique: rename one of the two, or delete the copy")


def _classify(path: str, problems: list[Problem]) -> type[BaseModel] | None:
    """Which model a file holds; None for files Fleet does not read (problems for misplaced YAML)."""
    if path in _SINGLETONS:
        return _SINGLETONS[path]
    if _CLUSTER.match(path):
        return Cluster
    if _JOB.match(path):
        return Job
    if _ROBOTS.match(path):
        return RobotFleet
    if _DEPLOYMENT.match(path):
        return Deployment
    if not path.startswith(DATA_DIRS):
        return None
    if path.endswith(".yml"):
        problems.append(Problem(path, 1, 1, "Fleet reads `.yaml` files only; this one would be ignored",
                                hint=f"rename it to {path[:-4]}.yaml"))
    elif path.endswith(".yaml"):
        problems.append(Problem(path, 1, 1, "this file is not part of the Fleet layout and would be ignored",
                                hint="clusters go in fleet/clusters/<name>.yaml, jobs in jobs/<team>/<name>.yaml, "
                                     "robot fleets in robots/<name>.yaml, deployments in deployments/<name>.yaml, "
                                     "policies in policies/{teams,priorities,placement,slos,notifications}.yaml"))
    return None


def build(model: type[BaseModel], parsed: ParsedDoc, problems: list[Problem]) -> Any:
    """Validate parsed data into `model`; on failure append one located problem per pydantic error."""
    try:
        return model.model_validate(parsed.data)
    except ValidationError as e:
        errors = e.errors(include_url=False)
        for err in errors:
            if not _echo_of_item_errors(err, errors):
                problems.append(_translate(parsed.path, parsed.positions, model, err))
        return None


def _echo_of_item_errors(err: Any, errors: list[Any]) -> bool:
    """pydantic reports a non-empty list whose every item failed also as "too short" (after dropping the bad
    items); that second error would tell the user the list is empty when it is not, so it is left out."""
    if err["type"] != "too_short" or not err.get("input"):
        return False
    loc = tuple(err["loc"])
    return any(tuple(o["loc"])[: len(loc)] == loc and len(o["loc"]) > len(loc) for o in errors)


# --- pydantic error -> Problem ----------------------------------------------------------------------------


def _translate(path: str, positions: Positions, model: type[BaseModel], err: Any) -> Problem:
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("[")))
    kind, inp, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    fld = format_field(loc)
    name = excerpt(loc[-1]) if loc else ""
    if len(loc) >= 2 and isinstance(loc[-1], int):   # an item of a list: `command[0]`, not `0`
        name = f"{excerpt(loc[-2])}[{loc[-1]}]"
    hint = ""
    at_key = False
    if kind == "missing":
        message = f"missing required field `{name}`"
        desc = _description(model, loc)
        hint = f"add `{name}:`" + (f" ({desc})" if desc else "")
    elif kind == "extra_forbidden":
        at_key = True
        message = f"unknown field `{name}`"
        allowed = _fields_at(model, loc[:-1])
        close = difflib.get_close_matches(name, allowed, n=1)
        hint = (f"did you mean `{close[0]}`? " if close else "") + (
            "allowed fields: " + ", ".join(allowed) if allowed else "remove it")
    elif kind == "literal_error":
        message = f"`{excerpt(inp)}` is not a valid {name}"
        hint = f"use one of: {ctx.get('expected', '')}".replace("'", "")
    elif kind == "string_pattern_mismatch":
        message = f"`{excerpt(inp)}` is not a valid name (RFC 1123 label)"
        hint = "use lowercase letters, digits and '-', starting and ending with a letter or digit"
    elif kind == "string_too_long":
        message = f"`{name}` is longer than {ctx.get('max_length')} characters"
        hint = "shorten it"
    elif kind in ("dict_type", "model_type", "model_attributes_type"):
        message = f"`{name or 'document'}` must be a mapping (key: value lines), not {_what(inp)}"
        hint = "indent its fields under it as `key: value`"
    elif kind in ("tuple_type", "list_type"):
        message = f"`{name}` must be a list, not {_what(inp)}"
        hint = "write each item on its own line starting with `- `"
    elif kind in ("int_type", "int_parsing", "int_from_float"):
        message = f"`{name}` must be a whole number, not {_what(inp)}"
        hint = "write it without quotes or decimals, e.g. 8"
    elif kind in ("float_type", "float_parsing"):
        message = f"`{name}` must be a number, not {_what(inp)}"
        hint = "write it without quotes, e.g. 1.5"
        if isinstance(inp, str) and re.fullmatch(r"[-+]?[0-9.]+[eE][-+]?[0-9]+", inp.strip()):
            hint = "YAML reads an exponent without a decimal point and sign as text: write e.g. 1.0e+6 or 1000000"
    elif kind == "finite_number":     # YAML reads .inf / .nan as floats; no price or duration is infinite
        spelled = ".nan" if inp != inp else ("-.inf" if inp < 0 else ".inf")
        message = f"`{name}` must be a finite number, not `{spelled}`"
        hint = "write an ordinary number, e.g. 1.5 (YAML reads .inf and .nan as infinity and not-a-number)"
    elif kind in ("string_type",):
        message = f"`{name}` must be a string, not {_what(inp)}"
        hint = ("give one value, not a list or mapping" if isinstance(inp, (list, dict)) else
                'quote it, e.g. "on" or "1.0" (YAML reads yes/no/on/off as booleans and digits as numbers)')
    elif kind in ("bool_type", "bool_parsing"):
        message = f"`{name}` must be true or false, not {_what(inp)}"
        hint = "write true or false"
    elif kind in ("greater_than_equal", "greater_than", "less_than", "less_than_equal"):
        op = {"greater_than_equal": ">=", "greater_than": ">", "less_than": "<", "less_than_equal": "<="}[kind]
        bound = next(iter(ctx.values()), "")
        message = f"`{name}` must be {op} {bound}, got {excerpt(inp)}"
        hint = f"set {name} to a value {op} {bound}"
    elif kind in ("too_short", "string_too_short") and (ctx.get("min_length") or 1) > 1:
        least = ctx.get("min_length")
        message = f"`{name}` must have at least {least} " + ("characters" if kind == "string_too_short" else "items") \
            + f", not `{excerpt(inp)}`"
        hint = _description(model, loc) or "write it in full"
    elif kind in ("too_short", "string_too_short"):
        message = f"`{name}` must not be empty"
        hint = "give at least one value"
    else:
        message = f"`{fld or 'document'}`: {err['msg']}"
    line, col = positions.of(loc, key=at_key)
    return Problem(path, line, col, message, field=fld, hint=hint)


def _what(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "empty"
    return f"{type(value).__name__} `{excerpt(value)}`"


def _unwrap(tp: Any) -> tuple[Any, bool]:
    """The model class inside Optional/tuple/dict annotations, and whether a dict key comes next in a loc."""
    keyed = False
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            tp = next((a for a in typing.get_args(tp) if a is not type(None)), tp)
        elif origin in (tuple, list):
            tp = typing.get_args(tp)[0]
        elif origin is dict:
            tp, keyed = typing.get_args(tp)[1], True
        else:
            return tp, keyed


def _model_at(model: type[BaseModel], loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The model class that the field path `loc` points into (None for plain values)."""
    current: Any = model
    skip_key = False
    for part in loc:
        if isinstance(part, int):
            continue
        if skip_key:
            skip_key = False
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        info = current.model_fields.get(part)
        if info is None:
            return None
        current, skip_key = _unwrap(info.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _fields_at(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    m = _model_at(model, loc)
    return list(m.model_fields) if m else []


def _description(model: type[BaseModel], loc: tuple[str | int, ...]) -> str:
    m = _model_at(model, loc[:-1])
    info = m.model_fields.get(str(loc[-1])) if m else None
    return (info.description or "") if info else ""
