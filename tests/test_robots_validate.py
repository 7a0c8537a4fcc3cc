"""robots/<fleet>.yaml and deployments/<name>.yaml (DESIGN 4d): their models, located errors, every rule of
robots/validate.py, the JSON Schema, and who may change a deployment (`fleet check`)."""

from __future__ import annotations

import json
import textwrap

from reconciler.catalog import load_catalog
from reconciler.load import load
from reconciler.ownership import Author, check_change
from reconciler.pipeline import check
from reconciler.problems import Problem, Severity
from reconciler.schema import schemas

from builders import with_files

D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64

ROBOTS = """\
name: aloha-sf
registry: http://127.0.0.1:5000
link: {uplink_mbps: 50, offline_ok_hours: 72}
defaults: {runtime: agent, compute: rtx-4090, disk_gb: 512}
robots:
  - {name: aloha-01, labels: {arm: aloha, ring: canary}}
  - {name: aloha-02, labels: {arm: aloha, cell: a}}
  - {name: aloha-03, labels: {arm: aloha, cell: b}}
"""


def deployment(**over: str) -> str:
    parts = {
        "head": "name: pi05-towel\nfleet: aloha-sf\nselector: {arm: aloha}\n",
        "model": f'model: {{artifact: "127.0.0.1:5000/models/pi05@{D1}", size_gb: 12, from_job: vision/train}}\n',
        "server": f'server: {{image: "127.0.0.1:5000/openpi@{D2}", port: 8000, health_path: /healthz}}\n',
        "rollout": textwrap.dedent("""\
            rollout:
              window: {cron: "0 18 * * 1-5", hours: 4}
              waves:
                - {name: canary, selector: {ring: canary}, soak_minutes: 30}
                - {name: rest, max_unavailable: "50%"}
            """),
        "tail": "gates: {health_timeout_minutes: 10, abort_failed_percent: 10}\non_failure: rollback\n",
    }
    parts.update(over)
    return "".join(parts.values())


def problems(robots: str = ROBOTS, dep: str | None = None, **extra: str | None) -> list[Problem]:
    files = with_files({"robots/aloha-sf.yaml": robots, "deployments/pi05-towel.yaml": dep or deployment(), **extra})
    return list(check(files, load_catalog()).problems)


def one(found: list[Problem], text: str) -> Problem:
    hits = [p for p in found if text in p.message]
    assert len(hits) == 1, [p.message for p in found]
    return hits[0]


def test_the_example_documents_are_valid_and_load() -> None:
    files = with_files({"robots/aloha-sf.yaml": ROBOTS, "deployments/pi05-towel.yaml": deployment()})
    v = check(files, load_catalog())
    assert v.problems == ()
    (path, fleet), = v.loaded.robot_fleets
    assert path == "robots/aloha-sf.yaml" and [r.name for r in fleet.robots] == ["aloha-01", "aloha-02", "aloha-03"]
    (_, dep), = v.loaded.deployments
    assert dep.digest == D1 and dep.owner_team == "vision"


def test_unpinned_model_is_located() -> None:
    p = one(problems(dep=deployment(model='model: {artifact: "reg:5000/models/pi05:latest", size_gb: 1}\n')),
            "not pinned by digest")
    assert (p.path, p.line, p.field) == ("deployments/pi05-towel.yaml", 4, "model.artifact")


def test_unknown_field_and_bad_digest_are_located() -> None:
    found = problems(robots=ROBOTS.replace("link: {", "link: {uplink: 3, "))
    p = one(found, "unknown field `uplink`")
    assert (p.path, p.line) == ("robots/aloha-sf.yaml", 3)
    found = problems(dep=deployment(server='server: {image: "r/x@sha256:12", port: 8000}\n'))
    assert one(found, "not pinned").field == "server.image"


def test_waves_must_not_overlap() -> None:
    rollout = textwrap.dedent("""\
        rollout:
          waves:
            - {name: canary, selector: {ring: canary}}
            - {name: arms, selector: {arm: aloha}}
        """)
    p = one(problems(dep=deployment(rollout=rollout)), "is in wave `canary` and in wave `arms`")
    assert (p.line, p.field) == (9, "rollout.waves[1].selector")


def test_waves_must_cover_every_robot_and_the_rest_goes_last() -> None:
    rollout = ("rollout:\n  waves:\n    - {name: canary, selector: {ring: canary}}\n"
               "    - {name: a, selector: {cell: a}}\n")
    p = one(problems(dep=deployment(rollout=rollout)), "are in no wave")
    assert "aloha-03" in p.message and p.field == "rollout.waves"
    rollout = "rollout:\n  waves:\n    - {name: rest}\n    - {name: canary, selector: {ring: canary}}\n"
    found = problems(dep=deployment(rollout=rollout))
    one(found, "has no selector but is not the last wave")
    one(found, "wave `canary` takes no robot")


def test_from_job_names_a_job_and_fleet_exists() -> None:
    found = problems(dep=deployment(head="name: pi05-towel\nfleet: nowhere\n",
                                    model=f'model: {{artifact: "r.io/m@{D1}", size_gb: 1, from_job: vision/nope}}\n'))
    p = one(found, "`vision/nope` is not a job of jobs/")       # a warning: gc removes finished jobs' files
    assert p.field == "model.from_job" and p.severity == Severity.WARNING
    assert one(found, "robot fleet `nowhere` does not exist").line == 2


def test_model_must_fit_the_disk_beside_the_previous_one() -> None:
    found = problems(robots=ROBOTS.replace("disk_gb: 512", "disk_gb: 20"))
    hits = [p for p in found if "does not fit robot" in p.message]
    assert len(hits) == 3 and "20 GB disk" in hits[0].message and hits[0].field == "model.size_gb"
    assert not [p for p in problems(robots=ROBOTS.replace("disk_gb: 512", "disk_gb: 24"))
                if "does not fit" in p.message]


def test_a_link_that_cannot_fill_the_window_is_a_warning_naming_both_numbers() -> None:
    found = problems(robots=ROBOTS.replace("uplink_mbps: 50", "uplink_mbps: 5"))
    p = one(found, "wave `rest`: 2 robot(s) x 12 GB take")
    assert p.severity == Severity.WARNING and "5 Mbit/s" in p.message and "10.7 h" in p.message
    assert p.field == "rollout.waves[1]"
    assert not [p for p in problems() if "window" in p.message]       # 50 Mbit/s: 2 x 12 GB in 1.1 h


def test_bad_cron_and_max_unavailable() -> None:
    rollout = textwrap.dedent("""\
        rollout:
          window: {cron: "0 25 * * 1-5", hours: 4}
          waves:
            - {name: canary, selector: {ring: canary}}
            - {name: rest, max_unavailable: "half"}
        """)
    found = problems(dep=deployment(rollout=rollout))
    assert one(found, "is not a cron expression").field == "rollout.window.cron"
    assert one(found, "`half` is not a count or a percent").field == "rollout.waves[1].max_unavailable"


def test_a_window_on_a_day_no_month_has_is_an_error() -> None:
    def window(expr: str) -> list[Problem]:
        rollout = f'rollout:\n  window: {{cron: "{expr}", hours: 4}}\n  waves:\n    - {{name: all}}\n'
        return [p for p in problems(dep=deployment(rollout=rollout)) if p.field == "rollout.window.cron"]
    p, = window("0 18 31 2 *")
    assert "never opens" in p.message and p.severity == Severity.ERROR
    assert len(window("0 18 31 4,6,9,11 *")) == 1
    assert not window("0 18 29 2 *")              # a leap day opens every four years
    assert not window("0 18 31 2,3 *")            # March has a 31st
    assert not window("0 18 31 2 1")              # both day fields restricted: a Monday in February matches


def test_a_robot_in_two_deployments_and_names_match_files() -> None:
    other = deployment(head="name: second\nfleet: aloha-sf\nselector: {cell: a}\n",
                       rollout="rollout:\n  waves:\n    - {name: all}\n")
    found = problems(**{"deployments/second.yaml": other})
    assert "aloha-02" in one(found, "is also in deployment").message
    found = problems(**{"deployments/other-name.yaml": other})
    one(found, "deployment `second` is in deployments/other-name.yaml")


def test_schema_has_both_documents() -> None:
    out = schemas()
    robots = json.loads(out["robots.schema.json"])
    assert "uplink_mbps" in json.dumps(robots) and robots["title"] == "Fleet robots document"
    assert "abort_failed_percent" in out["deployment.schema.json"]


# --- ownership ---------------------------------------------------------------------------------------------


def _change(login: str, teams: tuple[str, ...], head_dep: str, base_dep: str | None = None) -> list[str]:
    base = with_files({"robots/aloha-sf.yaml": ROBOTS, "deployments/pi05-towel.yaml": base_dep})
    head = with_files({"robots/aloha-sf.yaml": ROBOTS, "deployments/pi05-towel.yaml": head_dep})
    got = check_change(base, head, load(base), load(head), Author.of(login, teams), [])
    return [f"{v.rule}: {v.message}" for v in got]


def test_a_deployment_is_changed_by_its_teams_owners() -> None:
    assert _change("bob", ("org/vision",), deployment()) == []
    (v,) = _change("eve", ("org/lang",), deployment())
    assert v.startswith("team-deployment") and "team `vision`" in v
    moved = deployment(head="name: pi05-towel\nfleet: aloha-sf\nteam: lang\n")
    (v,) = _change("bob", ("org/vision",), moved, base_dep=deployment())     # moving it needs both teams
    assert "team `lang`" in v


def test_robots_folder_is_admin_only() -> None:
    base = with_files({"robots/aloha-sf.yaml": ROBOTS})
    head = with_files({"robots/aloha-sf.yaml": ROBOTS.replace("uplink_mbps: 50", "uplink_mbps: 60")})
    got = check_change(base, head, load(base), load(head), Author.of("bob", ("org/vision",)), [])
    assert [v.rule for v in got] == ["admin-only"]


def test_without_team_or_from_job_only_admins_change_it() -> None:
    dep = deployment(model=f'model: {{artifact: "r.io/m@{D1}", size_gb: 1}}\n')
    (v,) = _change("bob", ("org/vision",), dep)        # no team, no from_job: admins only
    assert "no team" in v


def test_a_broken_fleet_file_is_reported_once_not_again_by_its_deployments() -> None:
    found = problems(robots=ROBOTS.replace("uplink_mbps: 50", "uplink_mbps: fast"))
    assert [p.path for p in found if p.severity == Severity.ERROR] == ["robots/aloha-sf.yaml"]


def test_a_job_file_that_does_not_load_is_not_called_missing() -> None:
    """`vision/train`'s file is there but invalid: its own error says so, and the deployment is not warned that
    the file "does not exist" (a fuzz run of the forty-first session found it so)."""
    from builders import job

    found = problems(**{"jobs/vision/train.yaml": job("train") + "bogus: 1\n"})
    assert not [p.message for p in found if "from_job" in (p.field or "")], found
    assert [p.field for p in found if p.path == "jobs/vision/train.yaml"] == ["bogus"]


def test_a_job_file_that_holds_another_job_is_not_called_missing() -> None:
    """`jobs/vision/train.yaml` says `name: train2`: its own error says so; the deployment is not told the file
    "does not exist" (review of the forty-first session's first form, which excused only files that failed to load)."""
    from builders import job

    found = problems(**{"jobs/vision/train.yaml": job("train2")})
    assert not [p.message for p in found if "from_job" in (p.field or "")], found
