"""Loading: work tree and git revisions, every problem at once, defaults for optional documents."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from reconciler.catalog import load_catalog
from reconciler.load import load
from reconciler.models import PlacementDoc, PricesDoc
from reconciler.pipeline import check
from reconciler.problems import Problem, Severity, UsageError
from reconciler.sources import read_revision, read_worktree

from builders import JOB, base_files, job, with_files

CAT = load_catalog()


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, content in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def make_repo(root: Path, files: dict[str, bytes]) -> None:
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.invalid")
    git(root, "config", "user.name", "t")
    write_tree(root, files)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")


def test_base_fleet_is_valid() -> None:
    result = check(base_files(), CAT)
    assert result.problems == ()
    assert [c.name for c in result.loaded.clusters] == ["gke-usc1", "onprem-sjc"]
    assert result.loaded.placement == PlacementDoc() and result.loaded.prices == PricesDoc()


def test_git_revision_loads_exactly_like_the_work_tree(tmp_path: Path) -> None:
    files = with_files({"jobs/vision/small.yaml": job(), "fleet/prices.yaml": "prices: []\n"})
    make_repo(tmp_path, files)
    from_tree = load(read_worktree(tmp_path))
    from_git = load(read_revision(tmp_path, "HEAD"))
    assert read_worktree(tmp_path) == read_revision(tmp_path, "HEAD") == files
    for attr in ("clusters", "jobs", "teams", "priorities", "placement", "prices", "problems"):
        assert getattr(from_tree, attr) == getattr(from_git, attr), attr


def test_an_older_revision_is_read_without_checkout(tmp_path: Path) -> None:
    make_repo(tmp_path, base_files())
    (tmp_path / "jobs/vision/new.yaml").write_text(job("new"))
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "add a job")
    assert "jobs/vision/new.yaml" not in read_revision(tmp_path, "HEAD~1")
    assert "jobs/vision/new.yaml" in read_revision(tmp_path, "HEAD")
    assert (tmp_path / "jobs/vision/new.yaml").exists()  # the work tree was not touched


def test_unknown_revision_is_a_usage_error(tmp_path: Path) -> None:
    make_repo(tmp_path, base_files())
    with pytest.raises(UsageError, match="unknown git revision `nope`"):
        read_revision(tmp_path, "nope")


def test_not_a_repository_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="none of fleet, policies, jobs"):
        read_worktree(tmp_path)


def test_every_problem_is_reported_at_once() -> None:
    files = with_files({
        "jobs/vision/a.yaml": job("a", body="prioirty: research\n"),
        "jobs/vision/b.yaml": "name: b\nteam: [vision]\n",
        "jobs/lang/c.yaml": job("c", team="lang", body="priority: nope\n"),
    })
    result = check(files, CAT)
    assert [(p.path, p.line) for p in result.errors] == [
        ("jobs/lang/c.yaml", 6), ("jobs/vision/a.yaml", 6), ("jobs/vision/b.yaml", 1), ("jobs/vision/b.yaml", 1),
        ("jobs/vision/b.yaml", 2)]


def test_a_broken_teams_file_does_not_cascade() -> None:
    result = check(with_files({"policies/teams.yaml": "teams: {vision: 1}\n"}), CAT)
    assert [p.path for p in result.errors] == ["policies/teams.yaml"]


def test_hidden_and_foreign_files_are_not_read(tmp_path: Path) -> None:
    """A hidden YAML file (a draft) is not read and blocks nothing, but is warned of (forty-first session)."""
    write_tree(tmp_path, with_files({"jobs/vision/README.md": "notes", "jobs/vision/.draft.yaml": "x: [",
                                     "docs/other.yaml": "x: ["}))
    found = check(read_worktree(tmp_path), CAT).problems
    assert [(p.path, p.severity) for p in found] == [("jobs/vision/.draft.yaml", Severity.WARNING)]


def test_warning_for_an_option_no_pool_can_run() -> None:
    text = JOB.replace("relative_speed: 0.5\n",
                       "relative_speed: 0.5\n  - {accelerator: tpu-v6e, topology: 2x2, relative_speed: 0.3}\n")
    result = check(with_files({"jobs/vision/train.yaml": text}), CAT)
    assert result.ok
    assert [p.message for p in result.problems] == [
        "option 2 (tpu-v6e 2x2) fits no pool of the fleet and will never be chosen"]


def test_count_picks_the_smallest_valid_shape() -> None:
    text = JOB.replace("topology: 4x4x4", "count: 50")
    result = check(with_files({"jobs/vision/train.yaml": text}), CAT)
    assert result.ok, result.problems
    assert result.options["vision/train"][0].shape == "4x4x4"
    assert result.options["vision/train"][0].count == 128  # two 64-chip slices


def test_tpu_count_that_is_not_a_slice_size_warns() -> None:
    result = check(with_files({"jobs/vision/train.yaml": JOB.replace("topology: 4x4x4", "count: 50")}), CAT)
    assert [p.message for p in result.problems] == [
        "50 chips is not a tpu-v5p slice size: the job gets a 4x4x4 slice (64 chips)"]


def test_unknown_data_region_warns() -> None:
    result = check(with_files({"jobs/vision/small.yaml": job(body="data_region: us-centrl1\n")}), CAT)
    assert result.ok
    assert [p.message for p in result.problems] == [
        "no cluster is in region `us-centrl1`, so no placement can be near the data"]


def test_tpu_host_cpus_are_checked() -> None:
    text = JOB.replace("slices: 2", "slices: 2\n    cpus: 5000")
    result = check(with_files({"jobs/vision/train.yaml": text}), CAT)
    assert result.ok  # the GPU option still fits
    assert "fits no pool" in result.problems[0].message


def test_warning_for_a_job_no_quota_can_ever_admit() -> None:
    # lang: 128 tpu-v5p nominal; its cohort-mate vision lends at most 64: 4 slices of 64 chips never fit.
    text = "name: huge\nteam: lang\noptions:\n  - {accelerator: tpu-v5p, topology: 4x4x4, slices: 4}\nimage: img:1\n"
    result = check(with_files({"jobs/lang/huge.yaml": text}), CAT)
    assert [(p.path, p.message, p.field, p.severity.value) for p in result.problems] == [(
        "jobs/lang/huge.yaml", "no quota can ever admit this job: option 0 needs 256 tpu-v5p, team lang has a "
        "nominal 128 and may borrow at most 64", "options", "warning")]
    assert "raise team lang's quota" in result.problems[0].hint
    assert result.ok
    fits = check(with_files({"jobs/lang/huge.yaml": text.replace("slices: 4", "slices: 3")}), CAT)
    assert fits.problems == ()


def test_a_parse_cache_reuses_unchanged_files_and_rereads_changed_ones() -> None:
    """`fleet reconcile`'s cache across cycles: the same bytes give the same documents and problems (a broken
    file stays reported); changed bytes are parsed again; a removed file is gone; a duplicate name is still
    found across a cached file and a new one."""
    from reconciler.load import ParseCache

    cache = ParseCache()
    files = with_files({"jobs/vision/a.yaml": job("a"), "jobs/vision/b.yaml": "name: b\nteam: [vision]\n"})
    first = check(files, CAT, cache)
    again = check(files, CAT, cache)
    assert [(p.path, p.line, p.message) for p in again.errors] == [(p.path, p.line, p.message) for p in first.errors]
    assert again.errors and {p.path for p in again.errors} == {"jobs/vision/b.yaml"}
    assert next(j for j in again.loaded.jobs if j.name == "a") is next(j for j in first.loaded.jobs if j.name == "a")
    changed = dict(files, **{"jobs/vision/a.yaml": job("a", count=2).encode(), "jobs/vision/b.yaml": job("b").encode(),
                             "jobs/vision/c.yaml": job("a").encode()})
    third = check(changed, CAT, cache)
    assert check(changed, CAT).loaded.jobs == third.loaded.jobs
    assert [(p.path, p.line) for p in third.errors] == [(p.path, p.line) for p in check(changed, CAT).errors]
    assert any("also defined in jobs/vision/a.yaml" in p.message for p in third.errors)
    del changed["jobs/vision/c.yaml"]
    fourth = check(changed, CAT, cache)
    assert fourth.ok and "jobs/vision/c.yaml" not in cache.entries
    a = next(j for j in fourth.loaded.jobs if j.name == "a")
    assert a.options[0].count == 2


def test_the_loaded_documents_keep_no_plain_data_yet_still_locate_every_field() -> None:
    """Once a file's model is built, nothing reads its plain data again: the loaded documents (and the reconcile
    loop's parse cache) keep the text and positions only, which locate fields as before (the data was about
    120 MB of the 500 MB a loaded 100,000-job repository takes). A file whose model fails keeps none either."""
    from reconciler.load import ParseCache

    cache = ParseCache()
    body = "priority: research\nenv: {RUN: x}\n"
    files = with_files({"jobs/vision/a.yaml": job("a", body=body), "jobs/vision/b.yaml": "name: b\nteam: [vision]\n"})
    fresh = check(files, CAT)
    cached = check(files, CAT, cache)
    for v in (fresh, cached, check(files, CAT, cache)):
        docs = v.loaded.docs
        assert "jobs/vision/a.yaml" in docs and "jobs/vision/b.yaml" in docs
        assert all(d.data is None for d in docs.values())
        assert v.loaded.locate("jobs/vision/a.yaml", ("env", "RUN")) == (7, 12)
        assert v.loaded.locate("jobs/vision/a.yaml", ("priority",), key=True) == (6, 1)
        assert ("jobs/vision/b.yaml", 2, 7) in [(p.path, p.line, p.col) for p in v.errors]    # `team: [vision]`
    assert all(e[1].data is None for e in cache.entries.values() if not isinstance(e[1], Problem))
    assert next(j for j in cached.loaded.jobs if j.name == "a").env == {"RUN": "x"}


def test_jobs_with_one_option_and_other_spot_policies_each_get_their_own_fit() -> None:
    """resolve.FitIndex keeps each option's answer (100,000 jobs share a few hundred options): two jobs
    with the same 16-GPU option, one allowed on spot and one not, on a fleet whose only pool with two H100 nodes
    is spot. Whichever is checked first, the one that may not use spot fits no pool and the other fits."""
    from builders import GKE, job, with_files

    gke = GKE.replace("  - name: h100\n    accelerator: nvidia-h100-80gb\n    max: 8",
                      "  - name: h100\n    accelerator: nvidia-h100-80gb\n    max: 1")
    for first, second in (("allowed", "never"), ("never", "allowed")):
        files = with_files({"fleet/clusters/onprem-sjc.yaml": None, "fleet/clusters/gke-usc1.yaml": gke,
                            "jobs/vision/a.yaml": job("a", count=16, body=f"spot: {first}\n"),
                            "jobs/vision/b.yaml": job("b", count=16, body=f"spot: {second}\n")})
        v = check(files, load_catalog())
        never = "a" if first == "never" else "b"
        unfit = sorted(p.path for p in v.errors if "fits no pool in the fleet at all" in p.message)
        assert unfit == [f"jobs/vision/{never}.yaml"], [p.message for p in v.errors]


@pytest.mark.parametrize(("changes", "message"), [
    ({"policies/placement.yaml": "capacity_preference: [spot, zz]\n"},
     "`zz` is not a valid capacity_preference[1]"),
    ({"jobs/vision/train.yaml": JOB.replace("command: [python, -m, train]", "command: [1, go]")},
     "`command[0]` must be a string, not"),
])
def test_a_list_item_is_named_by_its_list_and_index(changes: dict[str, str], message: str) -> None:
    """Found by a hunt for misleading errors: an item was named by its index alone (`zz` is not a valid 1)."""
    v = check(with_files(changes), load_catalog())
    assert any(message in p.message for p in v.errors), [p.message for p in v.errors]


def test_a_string_under_its_least_length_is_not_called_empty() -> None:
    """A rollout window's `cron: "@daily"` was "`cron` must not be empty" (its least length is 9)."""
    from test_robots_validate import deployment, one, problems

    rollout = deployment().split("rollout:")[1].split("gates:")[0].replace('"0 18 * * 1-5"', '"@daily"')
    p = one(problems(dep=deployment(rollout="rollout:" + rollout)), "`cron` must have at least 9 characters")
    assert p.message == "`cron` must have at least 9 characters, not `@daily`" and "5-field cron" in p.hint


def test_a_cluster_file_that_does_not_load_gives_its_own_errors_and_no_cascade() -> None:
    """gke-usc1's file gets an unknown field: before the forty-first session (a fuzz run) its cluster vanished and
    every job that fits only its pools was told it "fits no pool in the fleet at all", placement.yaml's
    lease_cluster that it is "not a cluster", and data regions that no cluster is there: 9 errors and 10 warnings
    on the example fleet. Rules over the whole fleet wait until every cluster file loads."""
    files = base_files()
    broken = {**files, "fleet/clusters/gke-usc1.yaml": files["fleet/clusters/gke-usc1.yaml"] + b"bogus: 1\n"}
    pool_only_there = job("wide", count=64, body="spot: never\ndata_region: us-central1\n")
    placement = b"reconcile:\n  lease_cluster: gke-usc1\n"
    found = check({**broken, "jobs/vision/wide.yaml": pool_only_there.encode(),
                   "policies/placement.yaml": placement}, CAT).problems
    assert [(p.path, p.field) for p in found] == [("fleet/clusters/gke-usc1.yaml", "bogus")], found
    whole = check({**files, "jobs/vision/wide.yaml": pool_only_there.replace("count: 64", "count: 4096").encode(),
                   "policies/placement.yaml": placement}, CAT).problems
    assert "the job fits no pool in the fleet at all" in whole[0].message    # fixed, the rule judges again


@pytest.mark.parametrize("reader", ["worktree", "revision"])
def test_a_hidden_yaml_file_is_reported_not_dropped(tmp_path: Path, reader: str) -> None:
    """`policies/.placement.yaml` (a document renamed with a leading dot) was skipped without a word: the policy was
    lost and validation said ok. Other hidden names (`.gitkeep`) still pass unseen."""
    files = {**base_files(), "policies/.placement.yaml": b"reconcile:\n  interval_seconds: 30\n",
             "jobs/vision/.gitkeep": b""}
    make_repo(tmp_path, files)
    read = read_worktree(tmp_path) if reader == "worktree" else read_revision(tmp_path, "HEAD")
    found = check(read, CAT).problems
    assert [(p.path, p.message, p.severity) for p in found] == [
        ("policies/.placement.yaml", "is a hidden file (its name starts with a dot); Fleet does not read it",
         Severity.WARNING)]


def test_a_nested_repository_in_the_work_tree_is_reported_as_its_commit_is(tmp_path: Path) -> None:
    """A checked-out submodule (a folder holding `.git`) was read as this repository's files in the work tree, while
    `--rev` reported the submodule: validate passed locally what CI failed. Now both report it."""
    make_repo(tmp_path, base_files())
    sub = tmp_path / "jobs" / "vision" / "sub"
    sub.mkdir()
    (sub / ".git").write_text("gitdir: ../../../.git/modules/sub\n")
    (sub / "x.yaml").write_text(job("x"))
    found = check(read_worktree(tmp_path), CAT).problems
    assert [(p.path, p.message.split(" (")[0]) for p in found] == [
        ("jobs/vision/sub", "is a git repository inside this one")]


@pytest.mark.parametrize("how", ["yml", "nested"])
def test_cluster_data_that_cannot_be_read_gives_no_cascade_either(tmp_path: Path, how: str) -> None:
    """gke-usc1's file saved as `.yml`, or `fleet/clusters/` holding `.git`: its own error, and no rule over the
    whole fleet (review of the forty-first session's first form, which counted only `fleet/clusters/*.yaml`)."""
    files = {**base_files(), "policies/placement.yaml": b"reconcile:\n  lease_cluster: gke-usc1\n"}
    if how == "yml":
        files["fleet/clusters/gke-usc1.yml"] = files.pop("fleet/clusters/gke-usc1.yaml")
        found = check(files, CAT).problems
        broken = "fleet/clusters/gke-usc1.yml"
    else:
        write_tree(tmp_path, files)
        (tmp_path / "fleet" / "clusters" / ".git").write_text("gitdir: elsewhere\n")
        found = check(read_worktree(tmp_path), CAT).problems
        broken = "fleet/clusters"
    assert [p.path for p in found if p.severity == Severity.ERROR] == [broken], found


def test_an_editors_lock_link_or_a_hidden_folder_named_like_yaml_is_not_warned_of(tmp_path: Path) -> None:
    """Emacs keeps `.#name.yaml` as a link while a file is edited, and a hidden folder may be named `.old.yaml`:
    only a hidden regular file is a document that could be lost (review of the forty-first session's first form,
    which warned of both, and listed the type of every hidden entry, which a file gone meanwhile made raise)."""
    write_tree(tmp_path, base_files())
    (tmp_path / "jobs" / "vision" / ".#train.yaml").symlink_to("user@host.1234:1700000000")
    (tmp_path / "jobs" / "vision" / ".old.yaml").mkdir()
    assert check(read_worktree(tmp_path), CAT).problems == ()
