"""`fleet apply`: orchestration with a fake engine, spec loading, the CLI without Pulumi, the import boundary."""

from __future__ import annotations

import ast
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import stack_specs as specs

from reconciler.apply import orchestrate
from reconciler.apply.engine import _pulumi_errors, backend_url, require_ci_secrets, require_passphrase
from reconciler.apply.orchestrate import StackFailed
from reconciler.apply.pool_guard import Preview, Step
from reconciler.apply.specs import StackSpec, load_specs
from reconciler.cli import main
from reconciler.problems import UsageError
from stacks import SpecError

ROOT = Path(__file__).resolve().parents[1]


class FakeEngine:
    """Records calls in order; fails the stacks named in `fail` with their message."""

    def __init__(self, fail: Mapping[str, StackFailed] | None = None,
                 steps: Mapping[str, Sequence[Step]] | None = None) -> None:
        self.fail = dict(fail or {})
        self.steps = dict(steps or {})    # the resource steps of each stack's preview
        self.calls: list[tuple[str, str]] = []

    def _do(self, op: str, spec: Mapping[str, Any]) -> dict[str, int]:
        self.calls.append((op, spec["stack"]))
        if spec["stack"] in self.fail:
            raise self.fail[spec["stack"]]
        return {"create": 1, "same": 2} if op == "up" else {"create": 1, "update": 1, "same": 1}

    def preview(self, spec: Mapping[str, Any]) -> dict[str, int]:
        return self._do("preview", spec)

    def up(self, spec: Mapping[str, Any]) -> dict[str, int]:
        return self._do("up", spec)

    def preview_steps(self, spec: Mapping[str, Any]) -> Preview:
        return Preview(self.preview(spec), tuple(self.steps.get(spec["stack"], ())))


class FakeUi:
    def __init__(self, tty: bool = False, answer: bool = False) -> None:
        self.lines: list[str] = []
        self.tty, self.answer = tty, answer
        self.questions: list[str] = []

    def echo(self, line: str) -> None:
        self.lines.append(line)

    def interactive(self) -> bool:
        return self.tty

    def confirm(self, question: str) -> bool:
        self.questions.append(question)
        return self.answer


def stack_specs() -> list[StackSpec]:
    return [StackSpec(s["stack"], s["layer"], s["cluster"], s, s["stack"]) for s in specs.fleet_of_specs()]


INFRA = ["eks-use1-infra", "gke-use5-infra", "onprem-sjc-infra"]
KUEUE = ["eks-use1-kueue", "gke-use5-kueue", "onprem-sjc-kueue"]


def test_layers_in_order_infra_then_kueue_and_jobs_in_no_stack() -> None:
    engine, ui = FakeEngine(), FakeUi()
    results = orchestrate.run(orchestrate.select(stack_specs(), None), engine, preview=False, ui=ui)
    assert engine.calls == [("preview", s) for s in INFRA] + [("up", s) for s in INFRA + KUEUE]
    assert all(r.status == "ok" for r in results)
    assert ui.lines[0] == "eks-use1-infra: ok: created 1, updated 0, deleted 0, same 2"


def test_failed_infra_stops_later_layers_but_not_sibling_stacks() -> None:
    engine, ui = FakeEngine({"gke-use5-infra": StackFailed("googleapi: Error 403: quota exceeded")}), FakeUi()
    results = orchestrate.run(orchestrate.select(stack_specs(), None), engine, preview=False, ui=ui)
    # its preview fails (the check before any update), so it is not updated; its sibling infra stacks are
    assert engine.calls == [("preview", s) for s in INFRA] + [("up", s) for s in INFRA if s != "gke-use5-infra"]
    assert {r.stack: r.status for r in results} == {
        **dict.fromkeys(INFRA, "ok"), "gke-use5-infra": "failed", **dict.fromkeys(KUEUE, "skipped")}
    assert "gke-use5-infra: FAILED: googleapi: Error 403: quota exceeded" in ui.lines
    assert "gke-use5-kueue: skipped: not applied: the infra layer failed (gke-use5-infra)" in ui.lines
    text = orchestrate.summary(results, preview=False)
    assert text.startswith("2 of 6 stack(s) applied; failed: gke-use5-infra; skipped: eks-use1-kueue")
    assert "run `fleet apply` again" in text


def test_failed_kueue_is_the_last_layer() -> None:
    engine = FakeEngine({"eks-use1-kueue": StackFailed("x"), "onprem-sjc-kueue": StackFailed("y")})
    results = orchestrate.run(orchestrate.select(stack_specs(), None), engine, preview=False, ui=FakeUi())
    assert engine.calls == [("preview", s) for s in INFRA] + [("up", s) for s in INFRA + KUEUE]
    assert [r.stack for r in results if r.status == "failed"] == ["eks-use1-kueue", "onprem-sjc-kueue"]
    assert not [r for r in results if r.status == "skipped"]


def test_locked_stack_is_reported_with_hint_and_others_go_on() -> None:
    locked = StackFailed("stack gke-use5-infra is locked by another update (the stack is currently locked by 1 "
                         "lock(s))", "wait for the other `fleet apply` to finish and rerun")
    ui = FakeUi()
    results = orchestrate.run(orchestrate.select(stack_specs(), None), FakeEngine({"gke-use5-infra": locked}),
                              preview=False, ui=ui)
    line = next(line for line in ui.lines if line.startswith("gke-use5-infra"))
    assert line == ("gke-use5-infra: FAILED: stack gke-use5-infra is locked by another update (the stack is "
                    "currently locked by 1 lock(s))\n  hint: wait for the other `fleet apply` to finish and rerun")
    assert [r.status for r in results if r.layer == "infra"] == ["ok", "failed", "ok"]


def test_preview_never_calls_up_and_runs_every_layer_even_after_a_failure() -> None:
    engine, ui = FakeEngine({"gke-use5-infra": StackFailed("bad")}), FakeUi()
    results = orchestrate.run(orchestrate.select(stack_specs(), None), engine, preview=True, ui=ui)
    assert engine.calls == [("preview", s) for s in INFRA + KUEUE]
    assert ui.lines[0] == "eks-use1-infra: preview: to create 1, to update 1, to delete 0, same 1"
    assert orchestrate.summary(results, preview=True) == "5 of 6 stack(s) previewed; failed: gke-use5-infra"


def test_changed_lists_the_stacks_a_preview_would_change() -> None:
    """`--fail-on-changes` (drift checks) fails on any operation but `same`, and only on stacks that ran."""
    class Quiet(FakeEngine):
        def preview(self, spec: Mapping[str, Any]) -> dict[str, int]:
            self.calls.append(("preview", spec["stack"]))
            if spec["stack"] in self.fail:
                raise self.fail[spec["stack"]]
            return {"update": 1, "same": 3} if spec["stack"] == "gke-use5-kueue" else {"same": 4}

    chosen = orchestrate.select(stack_specs(), None)
    results = orchestrate.run(chosen, Quiet(), preview=True, ui=FakeUi())
    assert orchestrate.changed(results) == ["gke-use5-kueue"]
    assert orchestrate.changed(orchestrate.run(chosen, Quiet({"gke-use5-kueue": StackFailed("x")}), preview=True,
                                               ui=FakeUi())) == []


def test_fail_on_changes_needs_preview(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["apply", "--repo", str(ROOT), "--fail-on-changes", "--yes"])
    assert e.value.code == 2
    assert capsys.readouterr().err.startswith("error: --fail-on-changes needs --preview")


class StatefulEngine:
    """A fake Pulumi whose state outlives a run, as Pulumi's does: each stack is one resource, created, updated
    or the same as its spec. A kueue stack needs its cluster's infra stack applied first, a jobs stack its kueue
    stack (the real ones need the nodes and the queues)."""

    def __init__(self, fail: Mapping[str, StackFailed] | None = None) -> None:
        self.fail = dict(fail or {})
        self.live: dict[str, Mapping[str, Any]] = {}

    def _changes(self, spec: Mapping[str, Any]) -> dict[str, int]:
        before = self.live.get(spec["stack"])
        return {"create": 1} if before is None else {"same": 1} if before == spec else {"update": 1}

    def preview(self, spec: Mapping[str, Any]) -> dict[str, int]:
        return self._changes(spec)

    def preview_steps(self, spec: Mapping[str, Any]) -> Preview:
        return Preview(self.preview(spec))

    def up(self, spec: Mapping[str, Any]) -> dict[str, int]:
        if spec["stack"] in self.fail:
            raise self.fail[spec["stack"]]
        needs = {"kueue": "infra", "jobs": "kueue"}.get(spec["layer"])
        if needs is not None and f"{spec['cluster']}-{needs}" not in self.live:
            raise StackFailed(f"{spec['cluster']}-{needs} is not applied")
        changes = self._changes(spec)
        self.live[spec["stack"]] = spec
        return changes


def test_rerun_after_failure_converges() -> None:
    """Fleet keeps no state between runs; Pulumi's state is the record. Rerun against that same state with
    the failure gone, apply creates what the first run did not reach, leaves what it did as it is, and then
    the live state is every spec: a preview finds nothing to change."""
    chosen = orchestrate.select(stack_specs(), None)
    engine = StatefulEngine({"gke-use5-infra": StackFailed("googleapi: Error 503")})
    first = orchestrate.run(chosen, engine, preview=False, ui=FakeUi())
    done = {r.stack for r in first if r.status == "ok"}
    assert done == set(INFRA) - {"gke-use5-infra"} and set(engine.live) == done
    engine.fail.clear()
    second = orchestrate.run(chosen, engine, preview=False, ui=FakeUi())
    assert {r.stack: (r.status, r.changes) for r in second} == {
        s: ("ok", {"same": 1} if s in done else {"create": 1}) for s in INFRA + KUEUE}
    assert engine.live == {s.name: s.spec for s in chosen}
    assert orchestrate.changed(orchestrate.run(chosen, engine, preview=True, ui=FakeUi())) == []


def test_stack_filter_and_unknown_stack() -> None:
    assert [s.name for s in orchestrate.select(stack_specs(), "gke-use5-kueue")] == ["gke-use5-kueue"]
    with pytest.raises(UsageError) as e:
        orchestrate.select(stack_specs(), "gke-use9-infra")
    assert e.value.exit_code == 2
    assert e.value.message == "no stack named 'gke-use9-infra'"
    assert e.value.hint.startswith("known stacks: eks-use1-infra, eks-use1-kueue, gke-use5-infra, gke-use5-kueue")


def test_confirmation_rules() -> None:
    chosen = orchestrate.select(stack_specs(), "gke-use5-infra")
    orchestrate.confirm(chosen, preview=True, yes=False, ui=FakeUi(tty=False))  # preview needs no --yes
    orchestrate.confirm(chosen, preview=False, yes=True, ui=FakeUi(tty=False))
    with pytest.raises(UsageError, match="refusing to apply without --yes: stdin is not a terminal") as e:
        orchestrate.confirm(chosen, preview=False, yes=False, ui=FakeUi(tty=False))
    assert "fleet apply --preview" in e.value.hint and e.value.exit_code == 2
    ui = FakeUi(tty=True, answer=True)
    orchestrate.confirm(chosen, preview=False, yes=False, ui=ui)
    assert ui.questions == ["Apply 1 stack(s) in this order: gke-use5-infra?"]
    with pytest.raises(UsageError, match="not confirmed"):
        orchestrate.confirm(chosen, preview=False, yes=False, ui=FakeUi(tty=True, answer=False))


def test_replace_and_other_operations_are_shown_when_they_happen() -> None:
    assert orchestrate.format_changes({"replace": 1, "same": 3, "import": 2, "read": 0}, preview=False) == (
        "created 0, updated 0, replaced 1, deleted 0, same 3, import 2")


# --- spec files --------------------------------------------------------------------------------------------

def test_load_specs_reads_rendered_files(tmp_path: Path) -> None:
    specs.write_specs(tmp_path, specs.fleet_of_specs())
    loaded = load_specs(tmp_path)
    assert [s.name for s in loaded] == sorted(INFRA + KUEUE + ["eks-use1-jobs", "gke-use5-jobs", "onprem-sjc-jobs"])
    assert loaded[0].source == str(tmp_path / "eks-use1-infra.json")


def test_load_specs_errors_name_file_and_key(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is not a directory") as e:
        load_specs(tmp_path / "missing")
    assert "fleet render --out" in e.value.hint
    with pytest.raises(UsageError, match=r"no stack specs \(\*.json\)"):
        load_specs(tmp_path)
    (tmp_path / "gke-use5-infra.json").write_text('{"version": 1,\n  "stack": }')
    with pytest.raises(SpecError, match=r"gke-use5-infra.json: line 2 column 12: invalid JSON"):
        load_specs(tmp_path)
    spec = specs.gke_infra()
    del spec["node_pools"][1]["capacity"]
    (tmp_path / "gke-use5-infra.json").write_text(json.dumps(spec))
    with pytest.raises(SpecError, match=r"gke-use5-infra.json: node_pools\[1\]\.capacity: required key is missing"):
        load_specs(tmp_path)
    (tmp_path / "gke-use5-infra.json").unlink()
    (tmp_path / "renamed.json").write_text(json.dumps(specs.gke_infra()))
    with pytest.raises(SpecError, match=r"renamed.json: stack: 'gke-use5-infra' differs from the file name"):
        load_specs(tmp_path)


def _with_object(layer: str, obj: dict[str, Any]) -> list[dict[str, Any]]:
    fleet = specs.fleet_of_specs()
    [target] = [s for s in fleet if s["stack"] == f"gke-use5-{layer}"]
    target["objects"].append(obj)
    return fleet


PRIVILEGED_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "kube-system"},
                  "spec": {"hostPID": True, "containers": [{"name": "x", "image": "busybox",
                                                             "securityContext": {"privileged": True}}]}}
ADMIN_BINDING = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                 "metadata": {"name": "pwn"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                          "kind": "ClusterRole", "name": "cluster-admin"},
                 "subjects": [{"kind": "User", "name": "attacker"}]}


def _jobset(namespace: str = "foundation", **container: Any) -> dict[str, Any]:
    pod = {"spec": {"restartPolicy": "Never", "containers": [{"name": "training", "image": "img:1", **container}]}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "evil", "namespace": namespace},
            "spec": {"suspend": True, "replicatedJobs": [
                {"name": "worker", "replicas": 1, "template": {"spec": {"template": pod}}}]}}


def _deployment(**pod_spec: Any) -> dict[str, Any]:
    """A Deployment as render/service.py writes one, plus `pod_spec`."""
    pod = {"spec": {"restartPolicy": "Always", "containers": [{"name": "inference", "image": "img:1"}], **pod_spec}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "evil", "namespace": "foundation"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": pod}}


@pytest.mark.parametrize(("layer", "obj", "error"), [
    ("jobs", PRIVILEGED_POD, r"gke-use5-jobs.json: objects\[2\].kind: a Pod does not belong in a `jobs` stack"),
    ("kueue", ADMIN_BINDING, r"objects\[9\].kind: a ClusterRoleBinding does not belong in a `kueue` stack: Fleet "
                             r"renders only AdmissionCheck, ClusterQueue, Cohort, LocalQueue, Namespace"),
    ("kueue", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "foundation-2", "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}},
     r"objects\[9\].metadata.labels.pod-security.kubernetes.io/enforce: Fleet never renders this field in a "
     r"Namespace"),
    ("kueue", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}},
     r"objects\[9\].metadata.name: namespace 'kube-system' is the cluster's own"),
    ("kueue", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
               "metadata": {"name": "q", "namespace": "kube-system"}, "spec": {"clusterQueue": "foundation"}},
     r"objects\[9\].metadata.namespace: LocalQueue 'q' is in namespace 'kube-system', not one of the team "
     r"namespaces the gke-use5-kueue stack declares \(foundation\)"),
    ("kueue", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
               "metadata": {"name": "q", "namespace": "foundation"}}, r"a ClusterQueue is cluster-scoped"),
    ("kueue", {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "Cohort", "metadata": {"name": "c"}},
     r"Cohort 'kueue.x-k8s.io/v1alpha1': Fleet renders 'kueue.x-k8s.io/v1beta2'"),
    ("jobs", _jobset("kube-system"), r"JobSet 'evil' is in namespace 'kube-system'"),
    ("jobs", _jobset("other-team"), r"JobSet 'evil' is in namespace 'other-team'"),
    ("jobs", _jobset(securityContext={"privileged": True}),
     r"objects\[2\].spec.replicatedJobs\[0\].template.spec.template.spec.containers\[0\].securityContext: Fleet "
     r"never renders this field"),
    ("jobs", _jobset(env=[{"name": "T", "valueFrom": {"secretKeyRef": {"name": "admin", "key": "token"}}}]),
     r"containers\[0\].env\[0\].valueFrom.secretKeyRef: Fleet never renders"),
    ("jobs", _deployment(volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
     r"objects\[2\].spec.template.spec.volumes\[0\].hostPath: Fleet never renders this field in a Deployment"),
    ("jobs", _deployment(hostNetwork=True), r"objects\[2\].spec.template.spec.hostNetwork: Fleet never renders"),
])
def test_apply_accepts_only_what_render_writes(tmp_path: Path, layer: str, obj: dict[str, Any], error: str) -> None:
    """`--specs DIR` is input like any other: any Kubernetes object in a spec file would be applied with the
    cluster credentials of CI. Only the kinds, API versions, namespaces and JobSet fields Fleet renders pass."""
    specs.write_specs(tmp_path, _with_object(layer, obj))
    with pytest.raises(SpecError, match=error) as e:
        load_specs(tmp_path)
    assert "fleet render --out" in e.value.hint


# --- engine helpers (no Pulumi CLI needed) -----------------------------------------------------------------

def test_backend_defaults_to_local_file_backend_under_the_repo(tmp_path: Path) -> None:
    assert backend_url(tmp_path, {}) == f"file://{tmp_path.resolve()}/.fleet/pulumi"
    assert (tmp_path / ".fleet/pulumi").is_dir()
    assert backend_url(tmp_path, {"PULUMI_BACKEND_URL": "s3://bucket/fleet"}) == "s3://bucket/fleet"
    assert ".fleet/" in (ROOT / ".gitignore").read_text().split()


def test_passphrase_required_for_self_managed_backends_only() -> None:
    with pytest.raises(UsageError, match="encrypts stack secrets with a passphrase") as e:
        require_passphrase("file:///x/.fleet/pulumi", {})
    assert "PULUMI_CONFIG_PASSPHRASE" in e.value.hint
    require_passphrase("file:///x", {"PULUMI_CONFIG_PASSPHRASE": ""})  # empty is a choice Pulumi accepts
    require_passphrase("gs://b", {"PULUMI_CONFIG_PASSPHRASE_FILE": "/run/secret"})
    require_passphrase("https://api.pulumi.com", {})


@pytest.mark.parametrize("ci", [{"CI": "true"}, {"GITHUB_ACTIONS": "true"}])
def test_ci_refuses_a_throwaway_backend_and_an_empty_passphrase(ci: dict[str, str]) -> None:
    """A workflow whose secrets are missing passes them as empty strings: apply must not fall back to a fresh
    local state (every live resource unknown) with an empty passphrase."""
    with pytest.raises(UsageError, match="refusing to apply in CI without PULUMI_BACKEND_URL") as e:
        require_ci_secrets({**ci, "PULUMI_BACKEND_URL": "", "PULUMI_CONFIG_PASSPHRASE": ""})
    assert "secrets" in e.value.hint
    with pytest.raises(UsageError, match="refusing to apply in CI with an empty passphrase: the gs backend"):
        require_ci_secrets({**ci, "PULUMI_BACKEND_URL": "gs://state/fleet", "PULUMI_CONFIG_PASSPHRASE": ""})
    require_ci_secrets({**ci, "PULUMI_BACKEND_URL": "gs://state/fleet", "PULUMI_CONFIG_PASSPHRASE": "x"})
    require_ci_secrets({**ci, "PULUMI_BACKEND_URL": "https://api.pulumi.com"})
    require_ci_secrets({"CI": "", "PULUMI_CONFIG_PASSPHRASE": ""})  # a laptop: the local backend is fine


def test_apply_in_ci_without_secrets_exits_2_before_pulumi_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    fake_pulumi_on_path(tmp_path, monkeypatch)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("PULUMI_BACKEND_URL", "")
    specs.write_specs(tmp_path / "out/stacks", specs.fleet_of_specs())
    with pytest.raises(SystemExit) as e:
        main(["apply", "--repo", str(tmp_path), "--specs", str(tmp_path / "out/stacks"), "--preview"])
    assert e.value.code == 2
    assert capsys.readouterr().err.startswith("error: refusing to apply in CI without PULUMI_BACKEND_URL")
    assert not (tmp_path / ".fleet").exists()


def test_pulumi_errors_are_summarised_without_traceback() -> None:
    text = ("\n code: 255\n stdout: Updating (gke-use5-infra)\n  gcp:container:NodePool v5p-s0 creating\n"
            " stderr: error: update failed\n    error: googleapi: Error 403: Quota 'TPUV5P' exceeded\n"
            "error: update failed\n")
    assert _pulumi_errors(text) == "googleapi: Error 403: Quota 'TPUV5P' exceeded"
    assert _pulumi_errors(" stderr: error: update failed\n") == "update failed"
    assert _pulumi_errors("\n code: 1\n stdout: \n stderr: something odd\n") == "stderr: something odd"


# --- CLI ---------------------------------------------------------------------------------------------------

def test_apply_preview_without_pulumi_cli_exits_2_with_install_hint(tmp_path: Path) -> None:
    """Run the real entry point in a new process whose PATH has no `pulumi` executable (none is installed here
    anyway; an empty PATH makes sure of it on machines that have one)."""
    import shutil
    import subprocess

    specs.write_specs(tmp_path / "stacks", specs.fleet_of_specs())
    bindir = tmp_path / "bin"
    bindir.mkdir()
    assert shutil.which("pulumi", path=str(bindir)) is None
    env = {**os.environ, "PATH": str(bindir)}
    fleet = Path(sys.executable).parent / "fleet"  # the console script, as a user runs it
    r = subprocess.run([str(fleet), "apply", "--preview", "--repo", str(tmp_path),
                        "--specs", str(tmp_path / "stacks")], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith("error: fleet apply needs the Pulumi CLI (`pulumi`), and it is not on PATH\nhint: ")
    assert "pulumi/actions" in r.stderr and "get.pulumi.com" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def fake_pulumi_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `pulumi` that fails if ever run, first on PATH, and a passphrase: apply gets past its environment
    checks, so what a test sees is what apply decides before Pulumi runs."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "pulumi").write_text("#!/bin/sh\nexit 1\n")
    (bindir / "pulumi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "")
    for name in ("CI", "GITHUB_ACTIONS", "PULUMI_BACKEND_URL"):  # a local throwaway backend is refused in CI
        monkeypatch.delenv(name, raising=False)


def test_apply_refuses_without_yes_when_not_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """With a (fake) pulumi on PATH and a passphrase, apply still stops before Pulumi runs: no --yes, no tty."""
    fake_pulumi_on_path(tmp_path, monkeypatch)
    specs.write_specs(tmp_path / "out/stacks", specs.fleet_of_specs())
    monkeypatch.setattr(sys, "stdin", open(os.devnull))  # noqa: SIM115 (closed by pytest's teardown)
    with pytest.raises(SystemExit) as e:
        main(["apply", "--repo", str(tmp_path), "--specs", str(tmp_path / "out/stacks")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: refusing to apply without --yes: stdin is not a terminal")
    assert "hint: review the changes with `fleet apply --preview`, then run `fleet apply --yes`" in err
    with pytest.raises(SystemExit) as e:
        main(["apply", "--repo", str(tmp_path), "--specs", str(tmp_path / "out/stacks"), "--preview",
              "--stack", "nope"])
    assert e.value.code == 2
    assert capsys.readouterr().err.startswith("error: no stack named 'nope'\nhint: known stacks: eks-use1-infra")


def test_apply_without_specs_renders_the_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """By default apply plans and renders the repository in memory: the example's infra and kueue stacks."""
    fake_pulumi_on_path(tmp_path, monkeypatch)
    root = Path(__file__).resolve().parents[1]
    with pytest.raises(SystemExit) as e:
        main(["apply", "--repo", str(root), "--preview", "--stack", "nope"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    known = err.split("known stacks: ", 1)[1].split(", ")
    clusters = sorted(p.stem for p in (root / "fleet/clusters").glob("*.yaml")
                      if "\nprovider: slurm\n" not in p.read_text())      # a Slurm cluster has no stacks
    layers = ("infra", "kueue")
    assert [k.strip() for k in known] == sorted(f"{c}-{layer}" for c in clusters for layer in layers)


# --- architecture ------------------------------------------------------------------------------------------

def test_engine_is_the_only_module_importing_pulumi_automation() -> None:
    importers = []
    for path in sorted([*(ROOT / "reconciler").rglob("*.py"), *(ROOT / "stacks").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            if any(n == "pulumi.automation" or n.startswith("pulumi.automation.") for n in names):
                importers.append(path.relative_to(ROOT).as_posix())
    assert sorted(set(importers)) == ["reconciler/apply/engine.py"]


# --- the real engine, with the Automation API calls replaced -----------------------------------------------

class FakeAutoStack:
    def __init__(self, fail: Exception | None = None) -> None:
        self.fail = fail
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.workspace = self
        self.plugins: list[tuple[str, str]] = []

    def install_plugin(self, name: str, version: str) -> None:
        self.plugins.append((name, version))

    def preview(self, **kwargs: Any) -> Any:
        from pulumi.automation import OpType, PreviewResult

        self.calls.append(("preview", kwargs))
        if self.fail:
            raise self.fail
        return PreviewResult("", "", {OpType.CREATE: 2, OpType.SAME: 1})

    def up(self, **kwargs: Any) -> Any:
        self.calls.append(("up", kwargs))
        if self.fail:
            raise self.fail
        summary = type("Summary", (), {"resource_changes": {"update": 1, "same": 4}})()
        return type("Up", (), {"summary": summary})()


def fake_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, stack: FakeAutoStack) -> tuple[Any, list[Any]]:
    from reconciler.apply import engine as engine_module

    created: list[Any] = []

    def create_or_select_stack(**kwargs: Any) -> FakeAutoStack:
        created.append(kwargs)
        return stack

    monkeypatch.setattr(engine_module.auto, "create_or_select_stack", create_or_select_stack)
    eng = engine_module.PulumiEngine(tmp_path / "pulumi", {"PULUMI_BACKEND_URL": "file:///b"}, lambda line: None)
    return eng, created


def test_engine_selects_stack_by_name_with_inline_program_and_refreshes(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    stack = FakeAutoStack()
    eng, created = fake_engine(monkeypatch, tmp_path, stack)
    assert eng.preview(specs.gke_infra()) == {"create": 2, "same": 1}
    assert eng.up(specs.kueue()) == {"update": 1, "same": 4}
    assert [c["stack_name"] for c in created] == ["gke-use5-infra", "gke-use5-kueue"]
    assert all(c["project_name"] == "fleet" and callable(c["program"]) for c in created)
    opts = created[0]["opts"]
    assert opts.work_dir == str(tmp_path / "pulumi") and opts.env_vars == {"PULUMI_BACKEND_URL": "file:///b"}
    assert opts.project_settings.name == "fleet" and opts.project_settings.runtime == "python"
    assert [(op, kw["refresh"]) for op, kw in stack.calls] == [("preview", True), ("up", True)]
    assert [name for name, _ in stack.plugins] == ["gcp", "kubernetes"]
    assert all(version.startswith("v") for _, version in stack.plugins)


def test_engine_reports_locked_stack_and_provider_errors_per_stack(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    from pulumi.automation import CommandResult, ConcurrentUpdateError
    from pulumi.automation.errors import CommandError

    locked = ConcurrentUpdateError(CommandResult("", "error: the stack is currently locked by 1 lock(s)", 255))
    eng, _ = fake_engine(monkeypatch, tmp_path, FakeAutoStack(fail=locked))
    with pytest.raises(StackFailed) as e:
        eng.up(specs.gke_infra())
    assert e.value.message == ("stack gke-use5-infra is locked by another update "
                               "(the stack is currently locked by 1 lock(s))")
    assert "pulumi cancel --stack gke-use5-infra" in e.value.hint
    provider = CommandError(CommandResult("", "error: update failed\n  error: 403 quota exceeded for TPUV5P", 255))
    eng, _ = fake_engine(monkeypatch, tmp_path, FakeAutoStack(fail=provider))
    with pytest.raises(StackFailed, match=r"^403 quota exceeded for TPUV5P$"):
        eng.preview(specs.gke_infra())


def test_engine_turns_a_missing_cli_into_exit_2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from reconciler.apply import engine as engine_module

    def no_cli(**kwargs: Any) -> None:
        raise FileNotFoundError(2, "No such file or directory", "pulumi")

    monkeypatch.setattr(engine_module.auto, "create_or_select_stack", no_cli)
    eng = engine_module.PulumiEngine(tmp_path, {}, lambda line: None)
    with pytest.raises(UsageError, match="needs the Pulumi CLI") as e:
        eng.preview(specs.kueue())
    assert "pulumi/actions" in e.value.hint
