"""fleet health-check: the real readings of a healthy H100 (../shared/fixtures/nvidia-h100/), faulty variants
derived from them in memory (each changes only the fields its fault changes), the node-problem-detector
plugin protocol end to end, and the node-health manifests `fleet render` writes."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from reconciler.catalog import load_catalog
from reconciler.cli import cli
from reconciler.health import CONDITION, analyze, from_nvidia_smi_xml, from_nvml
from reconciler.health.check import run
from reconciler.observe.parse import parse_node
from reconciler.pipeline import check
from reconciler.plan import plan
from reconciler.render import render

from builders import GKE, ONPREM, base_files, shared_file, with_files

H100 = "fixtures/nvidia-h100"


def xml_text() -> str:
    return shared_file(f"{H100}/nvidia-smi-q.xml").read_text()


def nvml_doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(shared_file(f"{H100}/nvml-health.json").read_text())
    return doc


def changed(text: str, old: str, new: str) -> str:
    """`text` with the one occurrence of `old` replaced: a variant changes exactly the field it names."""
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def fleet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reconciler", *args], capture_output=True, text=True, timeout=120)


# --- the real readings ------------------------------------------------------------------------------------


def test_the_xml_reads_what_nvidia_smi_query_reports_for_the_same_gpu() -> None:
    """The XML reader agrees with nvidia-smi's own --query-gpu fields on every value the check judges."""
    rows = list(csv.DictReader(shared_file(f"{H100}/nvidia-smi-query.csv").read_text().splitlines(),
                               skipinitialspace=True))
    (row,) = rows
    (gpu,) = from_nvidia_smi_xml(xml_text(), "q.xml").gpus
    assert (gpu.index, gpu.uuid, gpu.name, gpu.bus_id) == (int(row["index"]), row["uuid"], row["name"],
                                                           row["pci.bus_id"])
    assert gpu.ecc_uncorrected_volatile == int(row["ecc.errors.uncorrected.volatile.total"])
    assert gpu.ecc_uncorrected_aggregate == int(row["ecc.errors.uncorrected.aggregate.total"])
    assert (gpu.remap_failure, gpu.remap_pending) == (row["remapped_rows.failure"] == "Yes",
                                                      row["remapped_rows.pending"] == "Yes")
    assert gpu.retired_pages_pending is None and row["retired_pages.pending"] == "[N/A]"
    assert gpu.clock_reasons == int(row["clocks_event_reasons.active"], 16) == 0x1      # GPU idle only
    assert gpu.recovery_action == "None" and gpu.lost is None


def test_nvml_and_the_xml_read_the_same_gpu_alike() -> None:
    by_xml, by_nvml = from_nvidia_smi_xml(xml_text(), "q.xml"), from_nvml(nvml_doc())
    fields = ("index", "uuid", "name", "bus_id", "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate",
              "remap_pending", "remap_failure", "retired_pages_pending", "clock_reasons", "lost", "xids")
    assert [[getattr(g, f) for f in fields] for g in by_nvml.gpus] == \
        [[getattr(g, f) for f in fields] for g in by_xml.gpus]
    assert (by_nvml.driver, by_xml.driver, by_nvml.attached, by_xml.attached) == ("580.159.04",) * 2 + (1, 1)
    assert by_nvml.xid_wait_s == 1.0


def test_the_healthy_h100_is_healthy_both_ways() -> None:
    topo = shared_file(f"{H100}/nvidia-smi-topo.txt").read_text()
    gpus_in_topology = len(re.findall(r"^GPU\d+\s", topo, re.M))
    assert gpus_in_topology == 1
    xml = analyze(from_nvidia_smi_xml(xml_text(), "nvidia-smi-q.xml"), expected_gpus=gpus_in_topology)
    nv = analyze(from_nvml(nvml_doc()), expected_gpus=gpus_in_topology)
    assert (xml.status, xml.exit_code, xml.faults) == ("healthy", 0, ())
    assert xml.line == "healthy: 1 GPU(s) NVIDIA H100 80GB HBM3, driver 580.159.04 (nvidia-smi-q.xml)"
    assert nv.line == "healthy: 1 GPU(s) NVIDIA H100 80GB HBM3, driver 580.159.04, no fatal Xid in 1s (NVML)"


# --- faulty variants of the XML ---------------------------------------------------------------------------

AT = "GPU 0 (00000000:00:06.0): "
VOLATILE = "<volatile>\n\t\t\t\t<sram_correctable>0</sram_correctable>\n\t\t\t\t<sram_uncorrectable_parity>0"
EVENT = "<clocks_event_reason_{0}>Not Active</clocks_event_reason_{0}>"
XML_FAULTS = {
    "dram double-bit error since boot": (
        "<dram_uncorrectable>0</dram_uncorrectable>\n\t\t\t</volatile>",
        "<dram_uncorrectable>1</dram_uncorrectable>\n\t\t\t</volatile>",
        "1 uncorrectable ECC error(s) since the driver loaded"),
    "sram parity error since boot": (VOLATILE, VOLATILE[:-1] + "2",
                                     "2 uncorrectable ECC error(s) since the driver loaded"),
    "row remapping failed": ("<remapped_row_failure>No<", "<remapped_row_failure>Yes<",
                             "row remapping failed (no spare rows left)"),
    "row remap pending": ("<remapped_row_pending>No<", "<remapped_row_pending>Yes<",
                          "row remapping pending (reset the GPU)"),
    "retired pages pending": ("<pending_retirement>N/A<", "<pending_retirement>Yes<",
                              "retired pages pending (reset the GPU)"),
    "sram threshold": ("<sram_threshold_exceeded>No<", "<sram_threshold_exceeded>Yes<",
                       "SRAM uncorrectable errors past NVIDIA's threshold"),
    "unrepairable memory": ("<unrepairable_memory>No<", "<unrepairable_memory>Yes<", "unrepairable memory"),
    "driver asks for a reset": ("<gpu_recovery_action>None<", "<gpu_recovery_action>Reset<",
                                "the driver asks for recovery action Reset"),
    "hw slowdown": (EVENT.format("hw_slowdown"), EVENT.format("hw_slowdown").replace("Not Active", "Active"),
                    "HW slowdown"),
    "hw thermal": (EVENT.format("hw_thermal_slowdown"),
                   EVENT.format("hw_thermal_slowdown").replace("Not Active", "Active"), "HW thermal slowdown"),
    "power brake": (EVENT.format("hw_power_brake_slowdown"),
                    EVENT.format("hw_power_brake_slowdown").replace("Not Active", "Active"),
                    "HW power brake slowdown"),
    "sw thermal": (EVENT.format("sw_thermal_slowdown"),
                   EVENT.format("sw_thermal_slowdown").replace("Not Active", "Active"), "SW thermal slowdown"),
}


@pytest.mark.parametrize("case", sorted(XML_FAULTS))
def test_each_fault_in_the_xml_takes_the_node_out_with_one_line(case: str) -> None:
    old, new, what = XML_FAULTS[case]
    verdict = analyze(from_nvidia_smi_xml(changed(xml_text(), old, new), "q.xml"))
    assert (verdict.status, verdict.exit_code, verdict.line) == ("problem", 1, AT + what)
    assert [(f.gpu, f.bus_id) for f in verdict.faults] == [(0, "00000000:00:06.0")]


def test_a_gpu_attached_but_unreadable_fell_off_the_bus() -> None:
    text = changed(xml_text(), "<attached_gpus>1<", "<attached_gpus>2<")
    assert analyze(from_nvidia_smi_xml(text, "q.xml")).line == \
        "node: 2 GPUs attached but only 1 readable (a GPU fell off the bus)"


def test_fewer_gpus_than_the_node_shape_is_a_fault() -> None:
    verdict = analyze(from_nvidia_smi_xml(xml_text(), "q.xml"), expected_gpus=8)
    assert (verdict.exit_code, verdict.line) == (1, "node: 1 of 8 GPUs visible (a GPU fell off the bus)")


def test_every_fault_is_on_the_one_line() -> None:
    text = changed(xml_text(), "<remapped_row_failure>No<", "<remapped_row_failure>Yes<")
    text = changed(text, EVENT.format("hw_slowdown"), EVENT.format("hw_slowdown").replace("Not Active", "Active"))
    verdict = analyze(from_nvidia_smi_xml(text, "q.xml"), expected_gpus=2)
    assert verdict.line == ("node: 1 of 2 GPUs visible (a GPU fell off the bus); "
                            f"{AT}row remapping failed (no spare rows left); {AT}HW slowdown")
    assert "\n" not in verdict.line


def test_lifetime_errors_the_gpu_repaired_are_history_not_a_fault() -> None:
    """What a real H100 in service read (2 uncorrectable errors in its life, 1 row remapped, nothing pending
    or failed): healthy, and the line says so. Draining it would take a good node out for good."""
    text = changed(xml_text(), "<dram_uncorrectable>0</dram_uncorrectable>\n\t\t\t\t<sram_threshold_exceeded>",
                   "<dram_uncorrectable>2</dram_uncorrectable>\n\t\t\t\t<sram_threshold_exceeded>")
    text = changed(text, "<remapped_row_unc>0<", "<remapped_row_unc>1<")
    verdict = analyze(from_nvidia_smi_xml(text, "q.xml"))
    assert (verdict.exit_code, verdict.line.rsplit("; ", 1)[1]) == \
        (0, "GPU 0: 2 uncorrectable ECC error(s) in its lifetime, repaired")
    # the same count on a GPU that repairs nothing (no row remapping, no page retirement) is a fault
    unrepaired = changed(changed(text, "<remapped_row_pending>No<", "<remapped_row_pending>N/A<"),
                         "<remapped_row_failure>No<", "<remapped_row_failure>N/A<")
    assert analyze(from_nvidia_smi_xml(unrepaired, "q.xml")).exit_code == 1


def test_drivers_before_570_ask_for_a_reset_in_gpu_reset_status() -> None:
    status = ("<gpu_reset_status><reset_required>Yes</reset_required>"
              "<drain_and_reset_recommended>{}</drain_and_reset_recommended></gpu_reset_status>")
    for drain, action in (("No", "Reset"), ("Yes", "Drain and Reset")):
        text = changed(xml_text(), "<gpu_recovery_action>None</gpu_recovery_action>", status.format(drain))
        assert analyze(from_nvidia_smi_xml(text, "q.xml")).line == f"{AT}the driver asks for recovery action {action}"
    text = changed(xml_text(), "<gpu_recovery_action>None</gpu_recovery_action>", status.format("No").replace(
        "<reset_required>Yes", "<reset_required>No"))
    assert analyze(from_nvidia_smi_xml(text, "q.xml")).exit_code == 0


def test_drivers_before_535_name_the_reasons_clocks_throttle() -> None:
    text = xml_text().replace("clocks_event_reason", "clocks_throttle_reason")
    flag = "<clocks_throttle_reason_hw_slowdown>{}<"
    text = changed(text, flag.format("Not Active"), flag.format("Active"))
    assert analyze(from_nvidia_smi_xml(text, "q.xml")).line == AT + "HW slowdown"


# --- faulty variants of the NVML reading ------------------------------------------------------------------


def nvml_with(**fields: Any) -> dict[str, Any]:
    doc = nvml_doc()
    for k, v in fields.items():
        assert k in doc["gpus"][0], k
        doc["gpus"][0][k] = v
    return doc


NVML_FAULTS: dict[str, tuple[dict[str, Any], str]] = {
    "uncorrectable since boot": ({"ecc_uncorrected_volatile": 3},
                                 "3 uncorrectable ECC error(s) since the driver loaded"),
    "remap pending": ({"remapped_rows": [0, 1, 1, 0]}, "row remapping pending (reset the GPU)"),
    "remap failure": ({"remapped_rows": [0, 0, 0, 1]}, "row remapping failed (no spare rows left)"),
    "retired pages pending": ({"retired_pages_pending": 1}, "retired pages pending (reset the GPU)"),
    "thermal and idle": ({"throttle_reasons": 0x41}, "HW thermal slowdown"),
    "xid 79": ({"xid_wait_1s": {"xids": [79]}}, "Xid 79 (GPU has fallen off the bus)"),
    "xid 48 and an app's 13": ({"xid_wait_1s": {"xids": [13, 48, 48]}}, "Xid 48 (double-bit ECC error)"),
    "xid 64": ({"xid_wait_1s": {"xids": [64]}}, "Xid 64 (GPU memory row remapping failure)"),
}


@pytest.mark.parametrize("case", sorted(NVML_FAULTS))
def test_each_fault_in_an_nvml_reading_takes_the_node_out(case: str) -> None:
    fields, what = NVML_FAULTS[case]
    verdict = analyze(from_nvml(nvml_with(**fields)))
    assert (verdict.exit_code, verdict.line) == (1, AT + what)


@pytest.mark.parametrize("xids", [[13], [31, 43], [94]])
def test_xids_that_are_an_applications_fault_or_contained_leave_the_node_in(xids: list[int]) -> None:
    assert analyze(from_nvml(nvml_with(xid_wait_1s={"xids": xids}))).exit_code == 0


def test_a_lost_gpu_is_a_fault_whatever_else_nvml_could_not_read() -> None:
    doc = nvml_doc()
    doc["gpus"] = [{"index": 0, "error": "NVMLError_GpuIsLost: GPU is lost"}]
    assert analyze(from_nvml(doc)).line == "GPU 0: fell off the bus (NVMLError_GpuIsLost: GPU is lost)"
    doc = nvml_with(ecc_uncorrected_volatile={"error": "NVMLError_GpuIsLost: GPU is lost"})
    assert analyze(from_nvml(doc)).line == AT + "fell off the bus (NVMLError_GpuIsLost: GPU is lost)"


# --- the plugin protocol, end to end ----------------------------------------------------------------------


def test_the_command_follows_the_plugin_protocol(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text(changed(xml_text(), "<remapped_row_failure>No<", "<remapped_row_failure>Yes<"))
    healthy = fleet("health-check", "--nvidia-smi-xml", str(shared_file(f"{H100}/nvidia-smi-q.xml")))
    problem = fleet("health-check", "--nvidia-smi-xml", str(bad))
    text = fleet("health-check", "--nvidia-smi-xml", str(shared_file(f"{H100}/nvidia-smi-q.txt")))
    missing = fleet("health-check", "--nvidia-smi-xml", str(tmp_path / "none.xml"))
    for r, code in ((healthy, 0), (problem, 1), (text, 2), (missing, 2)):
        assert (r.returncode, r.stdout.count("\n"), r.stderr) == (code, 1, ""), r
    assert problem.stdout == f"{AT}row remapping failed (no spare rows left)\n"
    assert re.fullmatch(r"cannot tell: .*nvidia-smi-q\.txt:2:1: not well-formed XML .*\(hint: save the output "
                        r"of `nvidia-smi -q -x` unchanged.*\)\n", text.stdout)
    assert missing.stdout.startswith("cannot tell: ") and "No such file" in missing.stdout


def test_without_nvidia_ml_py_it_cannot_tell(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)     # what Python does when the package is not installed
    r = CliRunner().invoke(cli, ["health-check", "--xid-wait-seconds", "0"])
    assert (r.exit_code, r.output) == (2, "cannot tell: the nvidia-ml-py package is not installed (pip install "
                                          "nvidia-ml-py) (hint: run on a node with an NVIDIA GPU and driver, or pass "
                                          "--nvidia-smi-xml FILE)\n")


@pytest.mark.skipif(Path("/dev/nvidiactl").exists(), reason="this machine has an NVIDIA driver")
def test_without_a_driver_it_cannot_tell_and_says_why() -> None:
    r = fleet("health-check", "--xid-wait-seconds", "0")
    assert (r.returncode, r.stderr) == (2, "")
    assert r.stdout.startswith("cannot tell: NVML does not start") and r.stdout.count("\n") == 1


@pytest.mark.parametrize("body, where", [
    ('<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
     '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">'
     '<!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;"><!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">'
     '<!ENTITY g "&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;"><!ENTITY h "&g;&g;&g;&g;&g;&g;&g;&g;&g;&g;">]>'
     '<nvidia_smi_log><x>&h;&h;&h;&h;&h;&h;&h;&h;&h;&h;&h;&h;&h;&h;&h;&h;&h;&h;&h;&h;</x></nvidia_smi_log>', "1:"),
    ("<gpus/>", "1:1"),
    ("", "1:1"),
])
def test_hostile_or_wrong_files_cannot_tell_without_a_traceback(tmp_path: Path, body: str, where: str) -> None:
    f = tmp_path / "g.xml"
    f.write_text(body)
    verdict = run(xml=f)
    assert verdict.exit_code == 2 and verdict.line.startswith(f"cannot tell: {f}:{where}")
    assert "(hint: " in verdict.line


@pytest.mark.parametrize("doc, field", [([], "gpus"), ({"gpus": [{"index": 0, "ecc_uncorrected_volatile": "0"}]},
                                                        "gpus[0]"),
                                        ({"gpus": [{"xid_wait_1s": {"xids": ["79"]}}]}, "gpus[0]")])
def test_an_nvml_reading_of_the_wrong_shape_names_the_field(tmp_path: Path, doc: object, field: str) -> None:
    f = tmp_path / "n.json"
    f.write_text(json.dumps(doc))
    verdict = run(nvml_json=f)
    assert verdict.exit_code == 2 and verdict.line.startswith(f"cannot tell: {f}:{field}: ")


# --- the node condition observe reads ---------------------------------------------------------------------


@pytest.mark.parametrize("status, healthy", [("True", False), ("False", True), ("Unknown", True)])
def test_observe_reads_the_plugins_condition_as_accelerator_health(status: str, healthy: bool) -> None:
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "labels": {"fleet.dev/pool": "h100-owned"},
                         "creationTimestamp": "2026-11-23T00:00:00Z"},
            "spec": {}, "status": {"conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "",
                 "lastTransitionTime": "2026-11-23T00:00:00Z"},
                {"type": CONDITION, "status": status, "reason": "FleetGPUFault", "message": AT + "HW slowdown",
                 "lastTransitionTime": "2026-11-23T00:00:00Z"}]}}
    assert parse_node(node).accelerator_healthy is healthy


# --- fleet render: node-problem-detector ------------------------------------------------------------------


def rendered(files: dict[str, bytes]) -> dict[str, str]:
    v = check(files, load_catalog())
    assert v.ok, v.errors
    return render(v, plan(v), load_catalog())


def health_files(out: dict[str, str]) -> list[str]:
    return sorted(k for k in out if "/node-health" in k)


def test_on_prem_gets_node_health_and_the_clouds_only_when_they_ask() -> None:
    assert health_files(rendered(base_files())) == ["onprem-sjc/node-health.yaml",
                                                    "onprem-sjc/node-health/h100-owned.json"]
    asked = with_files({"fleet/clusters/gke-usc1.yaml": GKE + "health_check: true\n",
                        "fleet/clusters/onprem-sjc.yaml": ONPREM + "health_check: false\n"})
    assert health_files(rendered(asked)) == ["gke-usc1/node-health.yaml", "gke-usc1/node-health/h100-spot.json",
                                             "gke-usc1/node-health/h100.json"]


def test_health_check_on_a_cluster_without_nvidia_gpus_is_a_located_error() -> None:
    tpu_only = GKE.split("  - name: h100\n")[0] + "health_check: true\n"
    v = check(with_files({"fleet/clusters/gke-usc1.yaml": tpu_only}), load_catalog())
    (p,) = v.errors
    assert (p.path, p.line, p.field) == ("fleet/clusters/gke-usc1.yaml", tpu_only.count("\n"), "health_check")
    assert "no NVIDIA GPU pool" in p.message and "health_check" in p.hint
    wrong_type = check(with_files({"fleet/clusters/onprem-sjc.yaml": ONPREM + "health_check: sometimes\n"}),
                       load_catalog())
    assert [(e.path, e.field) for e in wrong_type.errors] == [("fleet/clusters/onprem-sjc.yaml", "health_check")]


def objects(out: dict[str, str], cluster: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(out[f"{cluster}/node-health.yaml"]) if d]


def test_the_manifests_are_valid_kubernetes_objects() -> None:
    out = rendered(base_files())
    objs = objects(out, "onprem-sjc")
    assert [o["kind"] for o in objs] == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap",
                                         "DaemonSet"]
    for o in objs:
        kubernetes_validate.validate(o, "1.33", strict=True)


def test_the_daemonset_runs_the_check_on_exactly_its_pools_nodes() -> None:
    out = rendered(base_files())
    *_, config_map, ds = objects(out, "onprem-sjc")
    flavor = next(d for d in yaml.safe_load_all(out["onprem-sjc/kueue.yaml"])
                  if d and d["kind"] == "ResourceFlavor" and d["metadata"]["name"] == "h100-owned")
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == flavor["spec"]["nodeLabels"]
    (container,) = pod["containers"]
    assert "nvidia.com/gpu" not in json.dumps(container["resources"])     # never takes a GPU from a job
    config_path = next(a.split("=", 1)[1] for a in container["command"] if a.startswith("--config.custom-plugin"))
    mount = container["volumeMounts"][0]["mountPath"]
    key = config_path.removeprefix(mount + "/")
    assert config_map["data"][key] == out["onprem-sjc/node-health/h100-owned.json"]


def test_the_monitor_config_is_one_node_problem_detector_accepts_and_runs_this_check() -> None:
    """What node-problem-detector checks when it loads a config (pkg/custompluginmonitor/types/config.go), and
    that the rule's arguments are ones `fleet health-check` takes: run them on the real H100's reading."""
    cfg = json.loads(rendered(base_files())["onprem-sjc/node-health/h100-owned.json"])
    assert cfg["plugin"] == "custom"
    seconds = {k: int(cfg["pluginConfig"][k].removesuffix("s")) for k in ("timeout", "invoke_interval")}
    (rule,) = cfg["rules"]
    assert int(rule["timeout"].removesuffix("s")) <= seconds["timeout"] <= seconds["invoke_interval"]
    assert rule["type"] == "permanent" and rule["condition"] == CONDITION
    assert [c["type"] for c in cfg["conditions"]] == [CONDITION]
    args = rule["args"]
    assert args[:3] == ["health-check", "--expected-gpus", "8"]    # the pool's node: 8 H100s
    wait = float(args[args.index("--xid-wait-seconds") + 1])
    assert wait < seconds["timeout"]
    r = fleet(*[a if a != "8" else "1" for a in args], "--nvidia-smi-xml", str(shared_file(f"{H100}/nvidia-smi-q.xml")))
    assert r.returncode == 0 and r.stdout.startswith("healthy: ")
