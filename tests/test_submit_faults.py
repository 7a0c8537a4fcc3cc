"""Found by a hunt: `fleet submit` defects (each test fails before the fix)."""

from __future__ import annotations

from pathlib import Path

import yaml
from test_submit import IMAGE, git, repo, submit  # noqa: F401  (the fixture)

TWO = """\
name: multi
team: vision
options:
  - {accelerator: nvidia-h100-80gb, count: 16}
  - {accelerator: nvidia-h100-80gb, count: 8, relative_speed: 0.5}
image: img:1
duration_hours: 4
"""


def test_from_with_a_new_count_changes_the_first_option_and_keeps_the_others(repo: Path) -> None:  # noqa: F811
    """docs/commands.md: 'a new --count or --topology changes the first' (only a new --accelerator replaces
    the options). The fallback option was dropped: the job can now run one way only."""
    (repo / "jobs/vision/multi.yaml").write_text(TWO)
    code, out = submit(repo, "vision/multi-v2", "--from", "vision/multi", "--count", "32", "--no-git")
    assert code == 0, out
    doc = yaml.safe_load((repo / "jobs/vision/multi-v2.yaml").read_text())
    assert doc["options"] == [{"accelerator": "nvidia-h100-80gb", "count": 32},
                              {"accelerator": "nvidia-h100-80gb", "count": 8, "relative_speed": 0.5}]


def test_from_a_job_file_that_is_not_yaml_is_a_located_error_not_an_internal_one(repo: Path) -> None:  # noqa: F811
    (repo / "jobs/vision/broken.yaml").write_text("name: broken\nteam: vision\noptions: [\n")
    code, out = submit(repo, "vision/again", "--from", "vision/broken", "--no-git")
    assert code in (1, 2), out
    assert "internal error" not in out and "ParserError" not in out
    assert "jobs/vision/broken.yaml" in out
    assert not (repo / "jobs/vision/again.yaml").exists()


def test_an_invalid_branch_is_refused_before_anything_is_written(repo: Path) -> None:  # noqa: F811
    """`--branch 'bad name'`: the file was written, `git checkout -b` failed, and the printed commands
    (`git add`, `git commit`) commit the job on the current branch, main; exit 0."""
    code, out = submit(repo, "vision/probe", "--image", IMAGE, "--accelerator", "nvidia-h100-80gb", "--count", "8",
                       "--branch", "bad name")
    printed = [line.strip() for line in out.splitlines() if line.startswith("  git ")]
    on_main = git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    # either refused up front (usage error, nothing written) or the commands make the branch first
    refused = code == 2 and not (repo / "jobs/vision/probe.yaml").exists()
    makes_branch = bool(printed) and printed[0].startswith("git checkout -b ")
    assert refused or (on_main and makes_branch), out


def test_a_huge_hours_flag_is_refused_naming_the_field(repo: Path) -> None:  # noqa: F811
    """`--hours 1e308` was written as a 309-digit integer (float.is_integer), which the loader refuses as
    "a 309-character number, over the 64-character limit": no field, no flag, a hint about quoting text."""
    code, out = submit(repo, "vision/probe", "--image", IMAGE, "--accelerator", "nvidia-h100-80gb", "--count", "8",
                       "--hours", "1e308", "--no-git")
    assert code == 1 and "[duration_hours]" in out and "309-character" not in out, out
