"""Run in the k8s-validators environment: validate the manifests of examples/k8s given as arguments.

Core kinds (Namespace, ConfigMap, DaemonSet, ...) against Kubernetes' own schemas (kubernetes-validate,
strict: unknown fields are errors). A PyTorchJob against the Kubeflow training operator's API models
(kubeflow-training, generated from its OpenAPI spec: every field name and type, required fields and
enums through its own deserializer), each replica's pod template against Kubernetes' PodTemplate
schema. Prints one JSON line per resource: {"file", "kind", "name", "ok", "error", "validated"}.
"""

import json
import sys

import kubernetes_validate
import yaml

K8S = "1.37.0"


def check_model(value, type_name, path):
    """Unknown keys and wrong types against the SDK's openapi_types (the CRD's OpenAPI schema)."""
    from kubeflow.training import models

    if type_name.startswith("V1"):  # a core type inside the CRD: validated with Kubernetes' schema
        return
    if type_name.startswith("list["):
        assert isinstance(value, list), f"{path}: a list expected"
        for i, v in enumerate(value):
            check_model(v, type_name[5:-1], f"{path}[{i}]")
        return
    if type_name.startswith("dict("):
        assert isinstance(value, dict), f"{path}: a mapping expected"
        inner = type_name[5:-1].split(", ", 1)[1]
        for k, v in value.items():
            check_model(v, inner, f"{path}.{k}")
        return
    simple = {"str": str, "int": int, "bool": bool, "object": object, "float": (int, float)}
    if type_name in simple:
        assert isinstance(value, simple[type_name]) and not (type_name == "int" and isinstance(value, bool)), f"{path}: {type_name} expected, got {value!r}"
        return
    model = getattr(models, type_name)
    assert isinstance(value, dict), f"{path}: an object ({type_name}) expected"
    by_key = {key: attr for attr, key in model.attribute_map.items()}
    for key, v in value.items():
        assert key in by_key, f"{path}.{key}: not a field of {type_name} (fields: {sorted(by_key)})"
        check_model(v, model.openapi_types[by_key[key]], f"{path}.{key}")


def pytorchjob(doc):
    from kubeflow.training.api_client import ApiClient

    check_model(doc, "KubeflowOrgV1PyTorchJob", "PyTorchJob")
    ApiClient()._ApiClient__deserialize(doc, "KubeflowOrgV1PyTorchJob")  # required fields, enums
    for role, spec in doc["spec"]["pytorchReplicaSpecs"].items():
        assert role in ("Master", "Worker"), f"replica type {role!r}"
        assert spec.get("restartPolicy") in (None, "Always", "OnFailure", "Never", "ExitCode"), spec.get("restartPolicy")
        template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"{role.lower()}"}, "template": spec["template"]}
        kubernetes_validate.validate(template, K8S, strict=True)
    return "kubeflow-training 1.9.4 models (PyTorchJob, its spec, run policy, replica specs) + each pod template strict against Kubernetes " + K8S


def main():
    for name in sys.argv[1:]:
        with open(name) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        for doc in docs:
            out = {"file": name, "kind": doc.get("kind"), "name": (doc.get("metadata") or {}).get("name")}
            try:
                if doc.get("apiVersion") == "kubeflow.org/v1" and doc.get("kind") == "PyTorchJob":
                    out["validated"] = pytorchjob(doc)
                else:
                    kubernetes_validate.validate(doc, K8S, strict=True)
                    out["validated"] = f"strict against Kubernetes {K8S}'s schema"
                out["ok"] = True
            except Exception as exc:  # noqa: BLE001 - reported per resource
                out.update(ok=False, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:500] if str(exc) else ''}")
            print(json.dumps(out))


if __name__ == "__main__":
    main()
