"""The deployment artefacts (deploy/), checked offline: every Kubernetes manifest valid
against the API's own schemas (kubernetes-validate bundles them), the kustomization naming
every manifest beside it, the node agent given what running sandboxes takes, the API
replicas none of the machine, both on one template root, and the systemd units accepted
by ``systemd-analyze verify``."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from bac_server.config import ServerConfig

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
SYSTEMD = DEPLOY / "systemd"
# The oldest Kubernetes the manifests are written for, and the newest the package knows.
VERSIONS = ("1.29", kubernetes_validate.utils.latest_version())
NODE_HOST_PATHS = {"/var/lib/bac", "/run/bac", "/sys/fs/cgroup", "/dev"}
API = {"app.kubernetes.io/name": "bac", "app.kubernetes.io/component": "api"}
NODE = {"app.kubernetes.io/name": "bac", "app.kubernetes.io/component": "node"}

Doc = dict[str, Any]


def _manifest_files() -> list[Path]:
    return sorted(p for p in KUBERNETES.rglob("*.yaml") if p.name != "kustomization.yaml")


def _docs(path: Path) -> list[Doc]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def _all_docs() -> list[Doc]:
    return [doc for path in _manifest_files() for doc in _docs(path)]


def _one(kind: str, labels: dict[str, str] | None = None) -> Doc:
    found = [d for d in _all_docs() if d["kind"] == kind
             and (labels is None or labels.items() <= d["metadata"].get("labels", {}).items())]
    assert len(found) == 1, f"{len(found)} {kind} manifests, expected one"
    return found[0]


def _pod(workload: Doc) -> Doc:
    spec: Doc = workload["spec"]["template"]["spec"]
    return spec


def _containers(pod: Doc) -> Iterator[Doc]:
    yield from pod.get("initContainers", [])
    yield from pod["containers"]


def _env_names(text: str) -> set[str]:
    return set(re.findall(r"\bBAC_[A-Z0-9_]+\b", text))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", _manifest_files(), ids=lambda p: str(p.relative_to(KUBERNETES)))
def test_every_manifest_is_valid_against_the_kubernetes_schemas(path: Path, version: str) -> None:
    """Strict: a misspelt or misplaced field fails as a missing or wrong one does."""
    docs = _docs(path)
    assert docs, f"{path} holds no manifest"
    problems = []
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            problems.append(f"{doc['kind']} {doc['metadata']['name']}: {exc.json_path}: "
                            f"{exc.message}")
    assert not problems, f"{path.name}, Kubernetes {version}: " + "; ".join(problems)


def test_the_kustomization_lists_every_manifest_beside_it() -> None:
    """The examples (a Secret to fill in, an Ingress to adapt) are the only ones left out."""
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    listed = kustomization["resources"]
    assert len(listed) == len(set(listed))
    present = {p.name for p in KUBERNETES.iterdir() if p.is_file()} - {"kustomization.yaml"}
    assert set(listed) == present
    assert {p.parent.name for p in _manifest_files() if p.name not in present} == {"examples"}
    # Every container's image is the one the kustomization lets operators set.
    names = {image["name"] for image in kustomization["images"]}
    for doc in _all_docs():
        if doc["kind"] in ("Deployment", "DaemonSet"):
            for container in _containers(_pod(doc)):
                assert container["image"].split(":")[0] in names, container["name"]


def test_selectors_names_and_references_agree() -> None:
    """What the schemas cannot see: selectors that select the pods, mounts of volumes that
    exist, keys of the Secret and the ConfigMap that are there."""
    deployment, daemonset = _one("Deployment", API), _one("DaemonSet", NODE)
    for workload, labels in ((deployment, API), (daemonset, NODE)):
        assert workload["spec"]["selector"]["matchLabels"] == labels
        assert labels.items() <= workload["spec"]["template"]["metadata"]["labels"].items()
    assert _one("Service")["spec"]["selector"] == API
    assert _one("PodDisruptionBudget")["spec"]["selector"]["matchLabels"] == API
    policy = _one("NetworkPolicy")["spec"]
    assert policy["podSelector"]["matchLabels"] == NODE
    assert [peer["podSelector"]["matchLabels"] for rule in policy["ingress"]
            for peer in rule["from"]] == [API]
    assert {p["port"] for rule in policy["ingress"] for p in rule["ports"]} == {7070, 7071}
    api_port = deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]
    assert _one("Service")["spec"]["ports"][0]["targetPort"] == api_port["name"]

    namespace = _one("Namespace")["metadata"]["name"]
    secret, config = _one("Secret"), _one("ConfigMap")
    assert secret["metadata"]["namespace"] == namespace
    for workload in (deployment, daemonset):
        pod = _pod(workload)
        volumes = {v["name"]: v for v in pod["volumes"]}
        for container in _containers(pod):
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in volumes, (container["name"], mount["name"])
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref is not None:
                    assert ref["name"] == secret["metadata"]["name"]
                    assert ref["key"] in secret["stringData"], ref["key"]
            for source in container.get("envFrom", []):
                assert source["configMapRef"]["name"] == config["metadata"]["name"]
        for volume in volumes.values():
            if "secret" in volume:
                assert volume["secret"]["secretName"] == secret["metadata"]["name"]
                for item in volume["secret"]["items"]:
                    assert item["key"] in secret["stringData"]


def test_the_node_agent_has_what_it_runs_sandboxes_with() -> None:
    """Privileged, the machine's network and process table (sandboxes outlive the agent
    only outside the pod's pid namespace), the machine's data, runtime state, cgroups and
    devices, on the machines chosen by label, one machine at a time."""
    daemonset = _one("DaemonSet", NODE)
    pod = _pod(daemonset)
    assert pod["hostNetwork"] is True
    assert pod["hostPID"] is True
    assert pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["nodeSelector"] == {"bac.dev/node": "true"}
    assert "tolerations" not in pod
    assert daemonset["spec"]["updateStrategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    (container,) = pod["containers"]
    assert container["command"] == ["bac", "node"]
    assert container["securityContext"]["privileged"] is True
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]
              if m["name"] in host_paths}
    for path in NODE_HOST_PATHS:
        assert path in mounts, f"{path} is not mounted from the machine"
        assert host_paths[mounts[path]["name"]] == path
        assert not mounts[path].get("readOnly", False), f"{path} is mounted read-only"
    # Mounts the agent makes there are the machine's, so the next agent sees them.
    for path in ("/var/lib/bac", "/run/bac"):
        assert mounts[path].get("mountPropagation") == "Bidirectional", path
    env = {e["name"]: e for e in container["env"]}
    assert env["BAC_NODE_ADVERTISE"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"
    assert {"BAC_DATABASE_URL", "BAC_NODE_TOKEN"} <= env.keys()
    assert {(p["containerPort"], p.get("hostPort")) for p in container["ports"]} == {
        (7070, 7070), (7071, 7071)}
    assert pod["terminationGracePeriodSeconds"] >= 30


API_CAPABILITIES = {"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL"}
TEMPLATE_ROOT = "/var/lib/bac-templates"


def test_the_api_replicas_have_none_of_the_machine() -> None:
    """No privilege, no host path, no host namespace; root (template builds give files to
    the sandboxes' ids) with a read-only root and only the capabilities that takes, probed
    on /health, two replicas that a drain never takes both of."""
    deployment = _one("Deployment", API)
    pod = _pod(deployment)
    assert deployment["spec"]["replicas"] == 2
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        assert not pod.get(key, False), key
    assert not [v for v in pod["volumes"] if "hostPath" in v]
    security = pod["securityContext"]
    assert security["runAsUser"] == 0 and security["runAsNonRoot"] is False
    assert security["seccompProfile"]["type"] == "RuntimeDefault"
    for container in _containers(pod):
        context = container["securityContext"]
        assert context.get("privileged") is False, container["name"]
        assert context["allowPrivilegeEscalation"] is False, container["name"]
        assert context["readOnlyRootFilesystem"] is True, container["name"]
        assert context["capabilities"]["drop"] == ["ALL"], container["name"]
        added = context["capabilities"].get("add", [])
        assert len(added) == len(set(added)) and set(added) == API_CAPABILITIES
        assert container["resources"]["requests"], container["name"]
    (container,) = pod["containers"]
    assert container["command"] == ["bac", "serve", "--role", "api"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/health", probe
    env = {e["name"]: e for e in container["env"]}
    assert env["BAC_HOST"]["value"] == "0.0.0.0"
    assert {"BAC_DATABASE_URL", "BAC_NODE_TOKEN"} <= env.keys()
    assert _one("PodDisruptionBudget")["spec"]["minAvailable"] == 1
    # Restarted when it exits (a replica that loses the leader lock does).
    assert pod.get("restartPolicy", "Always") == "Always"


def _claims(pod: Doc) -> dict[str, str]:
    return {v["name"]: v["persistentVolumeClaim"]["claimName"]
            for v in pod["volumes"] if "persistentVolumeClaim" in v}


def _setting(container: Doc, name: str) -> str:
    """A container's value of ``name``: its own env first, else the ConfigMap's."""
    for env in container.get("env", []):
        if env["name"] == name:
            value: str = env["value"]
            return value
    config: dict[str, str] = _one("ConfigMap")["data"]
    return config[name]


def test_the_template_root_is_one_claim_mounted_alike_by_api_replicas_and_nodes() -> None:
    """Builds run their steps on a node over layers the API replica names by path, and the
    replicas resolve templates there: one ReadWriteMany claim, mounted read-write at the
    same path in both pods, that path being BAC_TEMPLATES_DIR in both."""
    claims = {d["metadata"]["name"]: d for d in _all_docs()
              if d["kind"] == "PersistentVolumeClaim"}
    templates = claims["bac-templates"]["spec"]
    assert templates["accessModes"] == ["ReadWriteMany"]
    assert "storageClassName" not in templates  # the operator picks an RWX class
    assert templates["resources"]["requests"]["storage"] == "50Gi"
    assert claims["bac-uploads"]["spec"]["accessModes"] == ["ReadWriteMany"]
    seen = []
    for workload in (_one("Deployment", API), _one("DaemonSet", NODE)):
        pod = _pod(workload)
        by_claim = {claim: name for name, claim in _claims(pod).items()}
        (container,) = pod["containers"]
        mounts = [m for m in container["volumeMounts"]
                  if m["name"] == by_claim["bac-templates"]]
        assert len(mounts) == 1, container["name"]
        assert mounts[0]["mountPath"] == TEMPLATE_ROOT
        assert not mounts[0].get("readOnly", False) and "subPath" not in mounts[0]
        seen.append(_setting(container, "BAC_TEMPLATES_DIR"))
    assert seen == [TEMPLATE_ROOT, TEMPLATE_ROOT]
    # The uploads of COPY steps: shared by the API replicas where their data dir keeps them.
    pod = _pod(_one("Deployment", API))
    (container,) = pod["containers"]
    by_claim = {claim: name for name, claim in _claims(pod).items()}
    (uploads,) = [m for m in container["volumeMounts"] if m["name"] == by_claim["bac-uploads"]]
    assert uploads["mountPath"] == _setting(container, "BAC_DATA_DIR") + "/template-uploads"
    assert "bac-uploads" not in _claims(_pod(_one("DaemonSet", NODE))).values()


def test_artefacts_are_one_claim_every_api_replica_mounts_where_it_says() -> None:
    """Any replica serves an artefact another promoted: one ReadWriteMany claim mounted
    read-write in the API replicas at their BAC_ARTEFACTS_DIR; nothing of it on nodes."""
    claims = {d["metadata"]["name"]: d for d in _all_docs()
              if d["kind"] == "PersistentVolumeClaim"}
    assert claims["bac-artefacts"]["spec"]["accessModes"] == ["ReadWriteMany"]
    pod = _pod(_one("Deployment", API))
    (container,) = pod["containers"]
    by_claim = {claim: name for name, claim in _claims(pod).items()}
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == by_claim["bac-artefacts"]]
    assert not mount.get("readOnly", False) and "subPath" not in mount
    assert mount["mountPath"] == _setting(container, "BAC_ARTEFACTS_DIR")
    assert "bac-artefacts" not in _claims(_pod(_one("DaemonSet", NODE))).values()


def test_paused_sandboxes_state_is_one_claim_every_node_mounts_where_it_says() -> None:
    """Another node takes a paused sandbox over from the storage its node exported it to:
    one ReadWriteMany claim, mounted read-write in the node agents at the path their
    BAC_NODE_HANDOVER_DIR names; the API replicas have nothing of it."""
    claims = {d["metadata"]["name"]: d for d in _all_docs()
              if d["kind"] == "PersistentVolumeClaim"}
    assert claims["bac-handover"]["spec"]["accessModes"] == ["ReadWriteMany"]
    pod = _pod(_one("DaemonSet", NODE))
    (container,) = pod["containers"]
    by_claim = {claim: name for name, claim in _claims(pod).items()}
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == by_claim["bac-handover"]]
    assert not mount.get("readOnly", False) and "subPath" not in mount
    assert mount["mountPath"] == _setting(container, "BAC_NODE_HANDOVER_DIR")
    assert "bac-handover" not in _claims(_pod(_one("Deployment", API))).values()


def test_the_artefacts_name_only_settings_that_exist() -> None:
    """A misspelt BAC_* variable would be ignored without a word: every one named in
    deploy/ is a setting of the server's (ServerConfig reads BAC_<FIELD>)."""
    known = {f"BAC_{f.name.upper()}" for f in dataclasses.fields(ServerConfig)}
    for path in sorted(p for p in DEPLOY.rglob("*") if p.is_file()):
        unknown = _env_names(path.read_text()) - known
        assert not unknown, f"{path.relative_to(DEPLOY)} names {sorted(unknown)}"


def test_the_environment_file_example_is_one_that_systemd_reads_as_written() -> None:
    """KEY=value lines only, and no quote (systemd would take it as quoting), with what
    both roles require."""
    text = (SYSTEMD / "bac.env.example").read_text()
    keys = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep and re.fullmatch(r"BAC_[A-Z0-9_]+", key), line
        assert not set(value) & {"'", '"', "\\", "$", "`"}, line
        keys.append(key)
    assert {"BAC_DATABASE_URL", "BAC_NODE_TOKEN", "BAC_NODE_ADVERTISE"} <= set(keys)
    # The units set these; a value in the file would override theirs.
    assert not {"BAC_ROLE", "BAC_DATA_DIR", "BAC_STORE_KEY_FILE"} & set(keys)


def _unit(name: str) -> dict[str, list[str]]:
    """A unit's [Service] settings, each with all its values in order."""
    settings: dict[str, list[str]] = {}
    section = ""
    for line in (SYSTEMD / name).read_text().splitlines():
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "Service" and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            settings.setdefault(key, []).append(value)
    return settings


def test_the_units_run_each_role_as_it_needs() -> None:
    """The API as root with a read-only system but its data dir and the template root, and
    only the capabilities template builds take; the node agent as root, with no mount
    namespace of its own, leaving sandboxes and its helpers running when stopped. Both
    restarted whenever they exit, on the same template root."""
    api, node = _unit("bac-api.service"), _unit("bac-node.service")
    assert api["ExecStart"] == ["/usr/local/bin/bac serve --role api"]
    assert api["User"] == ["root"]
    assert "DynamicUser" not in api
    assert api["ProtectSystem"] == ["strict"]
    assert api["NoNewPrivileges"] == ["yes"]
    (bounding,) = api["CapabilityBoundingSet"]
    assert set(bounding.split()) == {f"CAP_{c}" for c in API_CAPABILITIES}
    assert api["AmbientCapabilities"] == [""]
    env = dict(v.partition("=")[::2] for v in api["Environment"])
    templates = env["BAC_TEMPLATES_DIR"]
    assert set(api["ReadWritePaths"][0].split()) == {env["BAC_DATA_DIR"], templates,
                                                    env["BAC_ARTEFACTS_DIR"]}
    # chown, setresuid and the restored setuid bits must not be filtered out.
    assert "RestrictSUIDSGID" not in api
    assert not [f for f in api["SystemCallFilter"] if "privileged" in f or "chown" in f]
    node_env = dict(v.partition("=")[::2] for v in node["Environment"])
    assert node_env["BAC_TEMPLATES_DIR"] == templates
    assert node["ExecStart"] == ["/usr/local/bin/bac node"]
    assert node["User"] == ["root"]
    assert node["KillMode"] == ["process"]
    assert node["TasksMax"] == ["infinity"]
    assert node["Restart"] == api["Restart"] == ["always"]
    namespacing = {"ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices",
                   "PrivateMounts", "ReadOnlyPaths", "ReadWritePaths", "TemporaryFileSystem",
                   "BindPaths", "DynamicUser", "NoNewPrivileges", "CapabilityBoundingSet"}
    assert not namespacing & node.keys()


def test_systemd_accepts_the_units(tmp_path: Path) -> None:
    """``systemd-analyze verify``, with ExecStart pointed at a bac that exists here (it
    checks that the command is executable)."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed (Debian's systemd package has it)")
    bac = shutil.which("bac") or str(Path(__file__).resolve().parents[2] / ".venv/bin/bac")
    assert Path(bac).is_file(), "no bac executable to point the units at"
    units = []
    for unit in sorted(SYSTEMD.glob("*.service")):
        copy = tmp_path / unit.name
        copy.write_text(unit.read_text().replace("/usr/local/bin/bac", bac))
        units.append(str(copy))
    assert len(units) == 2
    result = subprocess.run(
        [tool, "verify", "--man=no", "--recursive-errors=no", *units],
        capture_output=True, text=True, timeout=30, check=False)
    # Any complaint about the units themselves (an unknown setting, a bad value) fails;
    # the tool's own notes about this machine's other units do not.
    about_ours = [line for line in (result.stdout + result.stderr).splitlines()
                  if any(Path(u).name in line for u in units)]
    assert result.returncode == 0 and not about_ours, result.stdout + result.stderr
