"""Deterministic YAML for Kubernetes manifests. Pure.

Keys keep the order the renderer built them in (apiVersion, kind, metadata, spec: the order people read),
which is fixed by code, never by input order. The pure-Python SafeDumper is used on purpose (not libyaml's
emitter) so the bytes do not depend on how PyYAML was built. Strings that a YAML 1.1 reader would take for
something else (`"true"`, `"8080"`, `"1.5"`, `"on"`) are quoted by the dumper's resolver; a test checks that
every document reads back equal to what was rendered.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # Indent sequences inside mappings (kubectl's style); the default puts `- ` under the parent key.
        super().increase_indent(flow, False)


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_all(docs: Iterable[dict[str, Any]]) -> str:
    """Documents separated by `---`, each ending in a newline."""
    return yaml.dump_all(list(docs), Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                         allow_unicode=True, width=1 << 20, explicit_start=True)
