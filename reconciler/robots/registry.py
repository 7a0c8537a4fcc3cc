"""The fleet's OCI registry, through the `oras` client library.  EFFECT (network, files).

What goes through it (DESIGN 4d), each a small OCI artifact of one JSON layer, tag `latest`:
    fleet-desired/<fleet>/<robot>     the loop -> the robot: deployment, model digest, server, wave, window
    fleet-status/<fleet>/<robot>      the robot -> the loop: digest running, health, last heartbeat
    fleet-rollout/<fleet>/<deployment>  the loop's own record of a rollout (wave, soak, previous digests, events),
                                      so a `--once` run continues where the last one left, from any machine
(the JSON is also in the manifest, see DOC_ANNOTATION), and the models themselves (an artifact pinned by its
manifest digest), which the agent fetches blob by blob with HTTP range requests (a cut download resumes where it
stopped) and verifies by sha256. The requests go through oras's client (its session, authentication and
registry addressing); the small artifacts are assembled here, to push them in three requests, not seven.

A registry that does not answer is a `RegistryError` (a fact for the caller to report), never a hang: every
request has a timeout, and oras's own retry (up to two minutes of sleeps per request) is not used, since the
caller's next round is the retry.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import oras.provider
import requests

from ..problems import FleetError

DESIRED, STATUS, ROLLOUT = "fleet-desired", "fleet-status", "fleet-rollout"
MEDIA = {DESIRED: "application/vnd.fleet.desired.v1+json", STATUS: "application/vnd.fleet.status.v1+json",
         ROLLOUT: "application/vnd.fleet.rollout.v1+json"}
MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json")
MAX_JSON_BYTES = 1 << 20
DOC_ANNOTATION = "dev.fleet.doc"
"""The JSON layer's bytes, also as a manifest annotation: a read is one request (the manifest), checked against
the layer's digest; a tool that pulls the artifact (`oras pull`) gets the same bytes as doc.json."""
CHUNK = 1 << 16


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class RegistryError(FleetError):
    """The registry did not answer, refused, or sent something that does not verify."""


class _Timeout(requests.adapters.HTTPAdapter):
    def __init__(self, timeout_s: float) -> None:
        super().__init__(pool_maxsize=16)
        self.timeout_s = timeout_s

    def send(self, request: requests.PreparedRequest, stream: bool = False,
             timeout: float | tuple[float | None, float | None] | None = None, verify: bool | str = True,
             cert: str | tuple[str, str] | None = None, proxies: dict[str, str] | None = None) -> requests.Response:
        return super().send(request, stream, self.timeout_s if timeout is None else timeout, verify, cert, proxies)


class _Oras(oras.provider.Registry):  # type: ignore[misc]
    # one attempt per request: oras's retry decorator sleeps 3 s to 83 s between five attempts
    do_request = oras.provider.Registry.do_request.__wrapped__


class Registry:
    """One registry, by its URL (`http://host:port` is plain HTTP, `https://` TLS)."""

    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        u = urlparse(url if "://" in url else f"https://{url}")
        if u.scheme not in ("http", "https") or not u.netloc:
            raise RegistryError(f"{url!r} is not a registry URL", "write http://host:port or https://host")
        self.url, self.host = url, u.netloc
        self._r = _Oras(hostname=self.host, insecure=u.scheme == "http")
        self._r.session.mount("http://", _Timeout(timeout_s))
        self._r.session.mount("https://", _Timeout(timeout_s))
        self.prefix = f"{u.scheme}://{self.host}"
        self._mounts: dict[str, str] = {}       # blob digest -> a repository of this registry that holds it

    def close(self) -> None:
        self._r.session.close()

    def _request(self, method: str, url: str, **kw: Any) -> requests.Response:
        try:
            response: requests.Response = self._r.do_request(url, method, **kw)
            return response
        except requests.RequestException as e:
            raise RegistryError(f"registry {self.host} does not answer: {type(e).__name__}",
                                "check the site's link and that the registry runs; nothing was changed") from None
        except ValueError as e:     # oras: an authentication it cannot answer
            raise RegistryError(f"registry {self.host} refused: {e}", "give the robot credentials") from None

    # --- small JSON artifacts -----------------------------------------------------------------------------------
    def push_json(self, kind: str, name: str, doc: dict[str, Any]) -> str:
        """Push `doc` as `<kind>/<name>:latest` (an OCI manifest, an empty config, one JSON layer); returns the
        manifest digest. A blob this registry object pushed before (the same desired state to every robot of a
        wave, the empty config) is mounted from where it is rather than sent again: three requests a push."""
        repo = f"{kind}/{name}"
        body = json.dumps(doc, sort_keys=True).encode()
        layer = {"mediaType": MEDIA[kind], "size": len(body), "digest": _sha(body),
                 "annotations": {"org.opencontainers.image.title": "doc.json"}}
        config = {"mediaType": "application/vnd.oci.empty.v1+json", "size": 2, "digest": _sha(b"{}")}
        for blob, data in ((layer, body), (config, b"{}")):
            self._put_blob(repo, str(blob["digest"]), data)
        manifest = {"schemaVersion": 2, "mediaType": MANIFEST_TYPES[0], "artifactType": MEDIA[kind],
                    "config": config, "layers": [layer], "annotations": {DOC_ANNOTATION: body.decode()}}
        r = self._request("PUT", f"{self.prefix}/v2/{repo}/manifests/latest", data=json.dumps(manifest).encode(),
                          headers={"Content-Type": MANIFEST_TYPES[0]})
        if r.status_code != 201:
            raise RegistryError(f"registry {self.host} refused {repo}: HTTP {r.status_code} {r.text[:200]}",
                                "check the registry accepts pushes from here")
        return str(r.headers.get("Docker-Content-Digest", ""))

    def _put_blob(self, repo: str, digest: str, data: bytes) -> None:
        source = self._mounts.get(digest)
        url = f"{self.prefix}/v2/{repo}/blobs/uploads/" + (f"?mount={digest}&from={source}" if source else "")
        r = self._request("POST", url)
        if r.status_code == 201:            # mounted from `source`
            return
        location = r.headers.get("Location", "")
        if r.status_code != 202 or not location:
            raise RegistryError(f"registry {self.host} refused an upload to {repo}: HTTP {r.status_code}",
                                "check the registry accepts pushes from here")
        if not location.startswith("http"):
            location = self.prefix + location
        r = self._request("PUT", location + ("&" if "?" in location else "?") + f"digest={digest}", data=data,
                          headers={"Content-Type": "application/octet-stream"})
        if r.status_code != 201:
            raise RegistryError(f"registry {self.host} refused blob {digest[:19]} of {repo}: HTTP {r.status_code}",
                                "check the registry's storage")
        self._mounts[digest] = repo

    def pull_json(self, kind: str, name: str) -> dict[str, Any] | None:
        """`<kind>/<name>:latest` as the JSON it holds; None when there is none yet."""
        got = self.manifest(f"{kind}/{name}", "latest")
        if got is None:
            return None
        layers = got.get("layers") or []
        try:
            if not isinstance(layers, list) or not layers or int(layers[0].get("size", 0)) > MAX_JSON_BYTES:
                raise ValueError
            digest = str(layers[0]["digest"])
        except (AttributeError, KeyError, TypeError, ValueError):
            raise RegistryError(f"{kind}/{name} in {self.host} is not a Fleet document", "push it again") from None
        inline = str((got.get("annotations") or {}).get(DOC_ANNOTATION, "")).encode()
        if _sha(inline) == digest:       # the layer's own bytes, verified: no second request
            content = inline
        else:
            r = self._request("GET", f"{self.prefix}/v2/{kind}/{name}/blobs/{digest}")
            if r.status_code != 200 or _sha(r.content) != digest:
                raise RegistryError(f"{kind}/{name} in {self.host}: its layer does not verify "
                                    f"(HTTP {r.status_code})", "push it again")
            content = r.content
        try:
            doc = json.loads(content)
        except ValueError:
            raise RegistryError(f"{kind}/{name} in {self.host} is not JSON", "push it again") from None
        return doc if isinstance(doc, dict) else None

    def manifest(self, repo: str, reference: str) -> dict[str, Any] | None:
        """The manifest of `repo` at a tag or digest (verified against the digest), or None when absent."""
        r = self._request("GET", f"{self.prefix}/v2/{repo}/manifests/{reference}",
                          headers={"Accept": ", ".join(MANIFEST_TYPES)})
        if r.status_code == 404:
            return None
        if r.status_code != 200:
            raise RegistryError(f"registry {self.host}: {repo}:{reference} answered HTTP {r.status_code}",
                                "check the registry's log")
        if reference.startswith("sha256:") and "sha256:" + hashlib.sha256(r.content).hexdigest() != reference:
            raise RegistryError(f"{repo}@{reference} from {self.host} does not verify: its sha256 differs",
                                "the registry or the link corrupted it; it is fetched again next round")
        try:
            doc = r.json()
        except ValueError:
            raise RegistryError(f"registry {self.host}: {repo}:{reference} is not a manifest (not JSON)",
                                "check the URL names an OCI registry, not a web page or a proxy") from None
        return doc if isinstance(doc, dict) else None

    def fetch_blob(self, repo: str, digest: str, dest: Path) -> int:
        """Download blob `digest` of `repo` to `dest`, resuming a partial `dest`, then verify its sha256
        (a blob that does not verify is deleted, to be fetched whole next time). Returns the bytes received."""
        have = dest.stat().st_size if dest.exists() else 0
        headers = {"Range": f"bytes={have}-"} if have else {}
        r = self._request("GET", f"{self.prefix}/v2/{repo}/blobs/{digest}", headers=headers, stream=True)
        received = 0
        with r:
            if r.status_code == 416:            # the partial file is already whole
                pass
            elif r.status_code not in (200, 206):
                raise RegistryError(f"registry {self.host}: blob {digest[:19]} of {repo} answered HTTP "
                                    f"{r.status_code}", "check the artifact was pushed to this registry")
            else:
                mode = "ab" if r.status_code == 206 else "wb"   # a registry that ignores Range sends it whole
                try:
                    with open(dest, mode) as f:
                        for chunk in r.iter_content(CHUNK):
                            f.write(chunk)
                            received += len(chunk)
                except requests.RequestException:
                    raise RegistryError(f"the download of {digest[:19]} from {self.host} was cut after "
                                        f"{received:,} bytes", "it resumes from there next round") from None
        h = hashlib.sha256()
        with open(dest, "rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
        if "sha256:" + h.hexdigest() != digest:
            dest.unlink()
            raise RegistryError(f"blob {digest[:19]} of {repo} does not verify: its sha256 differs",
                                "it was deleted and is fetched again next round")
        return received

    def push_files(self, repo: str, tag: str, files: list[Path]) -> str:
        """Push `files` as an artifact (a model, in tests and benchmarks); returns its manifest digest."""
        try:
            response = self._r.push(target=f"{self.host}/{repo}:{tag}", files=[str(f) for f in files],
                                    disable_path_validation=True, quiet=True)
        except (requests.RequestException, ValueError) as e:
            raise RegistryError(f"cannot push {repo}:{tag} to {self.host}: {e}", "check the registry runs") from None
        return str(response.headers.get("Docker-Content-Digest", ""))

