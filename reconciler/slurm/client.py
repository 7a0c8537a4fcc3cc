"""slurmrestd over HTTP. EFFECT (network; reads the token from the environment).

Every request carries `X-SLURM-USER-TOKEN` (the JWT in the environment variable the cluster's `token_env`
names; never in the repository) and `X-SLURM-USER-NAME` (`slurm.user`, else the token's `sun` claim). Paths
are relative to `/slurm/<api_version>`. Nothing here raises for the world: a controller that does not answer,
a refused token, a body that is not JSON, an answer whose `errors` list is not empty, each is an `Answer` with
`ok` false, a problem kind (observe/model.py's), a message naming the cluster and URL, and a hint.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..models import Cluster

TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Answer:
    status: int                      # HTTP status; 0: no answer
    body: Any = None                 # the decoded JSON
    kind: str = ""                   # observe.model.ProblemKind when not ok
    message: str = ""
    hint: str = ""

    @property
    def ok(self) -> bool:
        return not self.kind


def token_user(token: str) -> str | None:
    """The `sun` (Slurm user name) claim of a JWT, or None (unreadable token, no claim)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return None
    sun = claims.get("sun") if isinstance(claims, dict) else None
    return sun if isinstance(sun, str) and sun else None


class SlurmClient:
    def __init__(self, cluster: Cluster, env: Mapping[str, str], timeout_s: float = TIMEOUT_S) -> None:
        assert cluster.slurm is not None, "a Slurm cluster"
        self.cluster, self.ref, self.timeout_s = cluster.name, cluster.slurm, timeout_s
        self.base = f"{self.ref.rest_url.rstrip('/')}/slurm/{self.ref.api_version}"
        self.token = env.get(self.ref.token_env) or ""
        self.user = self.ref.user or (token_user(self.token) if self.token else None)

    def problem(self) -> Answer | None:
        """Why no request can be made (no token, no user name), or None."""
        if not self.token:
            return Answer(0, None, "unauthorized", f"cluster {self.cluster}: the environment variable "
                          f"{self.ref.token_env} (its `slurm.token_env`) is not set, so slurmrestd cannot be asked",
                          f"export {self.ref.token_env}=$(scontrol token lifespan=86400 | cut -d= -f2) where Fleet "
                          "runs (a Secret in the reconciler's Deployment)")
        if not self.user:
            return Answer(0, None, "unauthorized", f"cluster {self.cluster}: the token in {self.ref.token_env} "
                          "names no user (`sun` claim) and the cluster file gives no `slurm.user`",
                          "set `slurm.user` in the cluster file, or use a token from `scontrol token`")
        return None

    def request(self, method: str, path: str, body: Any = None) -> Answer:
        bad = self.problem()
        if bad is not None:
            return bad
        url = self.base + path
        where = f"cluster {self.cluster}: {method} {url}"
        req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                     headers={"X-SLURM-USER-TOKEN": self.token, "X-SLURM-USER-NAME": self.user or "",
                                              "Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        except TimeoutError:
            return Answer(0, None, "timeout", f"{where}: no answer within {self.timeout_s:g} s",
                          "check that slurmrestd and slurmctld are up and not overloaded")
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            return Answer(0, None, "refused", f"{where}: {' '.join(str(reason).split())[:200]}",
                          "check `slurm.rest_url` and that slurmrestd listens there")
        try:
            doc = json.loads(raw) if raw else {}
        except ValueError:
            return Answer(status, None, "malformed", f"{where}: HTTP {status}, a body that is not JSON",
                          "is `slurm.rest_url` slurmrestd's address?")
        errors = [e for e in (doc.get("errors") or []) if isinstance(e, dict)] if isinstance(doc, dict) else []
        detail = "; ".join(str(e.get("error") or e.get("description") or e) for e in errors)[:300]
        if status in (401, 403):
            return Answer(status, doc, "unauthorized" if status == 401 else "forbidden",
                          f"{where}: HTTP {status} {detail}".rstrip(),
                          f"the token in {self.ref.token_env} is refused: make a new one (`scontrol token`)")
        if status >= 500 or status >= 400 or errors:
            kind = "server-error" if status >= 500 else "http-error"
            return Answer(status, doc, kind, f"{where}: HTTP {status} {detail}".rstrip(),
                          "slurmctld refused the request: see its message (and slurmctld's log)")
        return Answer(status, doc)
