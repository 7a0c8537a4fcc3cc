"""JSON Schema of every YAML document, generated from the models (never written by hand). Pure."""

from __future__ import annotations

import json

from pydantic import BaseModel

from .models import Cluster, Job, PlacementDoc, PricesDoc, PrioritiesDoc, TeamsDoc
from .notify.model import NotificationsDoc
from .observability.slos import SlosDoc
from .observe.model import Snapshot

DOCUMENTS: dict[str, type[BaseModel]] = {
    "cluster": Cluster,
    "teams": TeamsDoc,
    "priorities": PrioritiesDoc,
    "placement": PlacementDoc,
    "prices": PricesDoc,
    "job": Job,
    "slos": SlosDoc,
    "notifications": NotificationsDoc,
    "snapshot": Snapshot,        # what `fleet observe --format json` writes, not a YAML document
}


def schemas() -> dict[str, str]:
    """`{file name: JSON text}` for each document kind, e.g. `job.schema.json`."""
    out = {}
    for kind, model in DOCUMENTS.items():
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **model.model_json_schema()}
        schema["title"] = f"Fleet {kind} document"
        out[f"{kind}.schema.json"] = json.dumps(schema, indent=2) + "\n"
    return out
